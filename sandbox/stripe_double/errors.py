"""Refusals as Stripe shapes them, and the handler result that drops a response."""

from __future__ import annotations

DROP = object()  # handler result: close the socket without answering


class ApiError(Exception):
    """A refusal. `save` = whether a v1 idempotency key keeps it (business refusals
    are saved, parameter validation errors are not, as on Stripe)."""

    def __init__(self, status, type_, code, message, param=None, save=True, headers=None):
        super().__init__(message)
        self.status, self.type, self.code, self.message = status, type_, code, message
        self.param, self.save, self.headers = param, save, headers or {}

    def body(self, family):
        if family == "v2":
            return {"error": {"type": self.type, "code": self.code, "message": self.message}}
        err = {"type": self.type, "code": self.code, "message": self.message, "param": self.param}
        if self.code:
            err["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        return {"error": err}


def invalid(code, message, param=None, status=400, save=True):
    return ApiError(status, "invalid_request_error", code, message, param, save)


def bad_param(code, message, param):
    return invalid(code, message, param, save=False)



RESET = object()  # handler result: abort the connection (RST) without answering


class Raw:
    """A response given as bytes (not a JSON object): HTML, garbage, a redirect."""

    def __init__(self, status: int, data: bytes, content_type: str | None, headers=None):
        self.status, self.data, self.content_type = status, data, content_type
        self.headers = dict(headers or {})
