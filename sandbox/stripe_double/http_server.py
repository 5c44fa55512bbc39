"""HTTP/1.1 plumbing: one thread per connection, keep-alive, and the per-request
pipeline of a Stripe call (auth, faults, idempotency, latency, effect, drop)."""

from __future__ import annotations

import http.server
import itertools
import json
import os
import re
import socket
import struct
import time
import traceback
import urllib.parse

from . import control, faults, idempotency, routes
from .clock import http_date
from .errors import DROP, RESET, ApiError, Raw, bad_param
from .params import parse_form

AUTH_RE = re.compile(r"^Bearer\s+(?:sk|rk)_(test|live)_\S+$")

_req_counter = itertools.count(1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stripe-sandbox/1.0"
    sys_version = ""
    timeout = 300  # idle keep-alive connections are closed after this

    def version_string(self):
        return self.server_version

    def date_time_string(self, timestamp=None):
        """The `Date` header (on every response), from the sandbox's clock."""
        return http_date(self.sb.now() if timestamp is None else timestamp)

    # -- plumbing ------------------------------------------------------------
    @property
    def sb(self):
        return self.server.sandbox

    def setup(self):
        super().setup()
        self.sb.connection(+1)

    def finish(self):
        try:
            super().finish()
        finally:
            self.sb.connection(-1)

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            super().log_message(fmt, *args)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, body, headers=None):
        self._send_bytes(status, (json.dumps(body) + "\n").encode(), "application/json", headers)

    def _send_bytes(self, status, data, content_type, headers=None):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", f"req_sb{next(_req_counter):010d}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self._status = status

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _reset(self):
        """Aborts the connection: SO_LINGER 0 and close, so the peer sees a reset."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            os.close(self.connection.detach())
        except OSError:
            pass

    def _dispatch(self, method):
        self._status = None
        self._delayed = False
        self._stall = 0.0
        self._drop_rule = False
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send(400, {"error": {"type": "invalid_request_error", "code": None,
                                       "message": "Could not read the request body.",
                                       "param": None}})
            return
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        try:
            if path.startswith("/_sandbox/") or path == "/_sandbox":
                self._control(method, path, url.query, body)
            elif path.startswith(("/v1/", "/v2/")):
                self._api(method, path, url.query, body)
            else:
                self._send(404, ApiError(404, "invalid_request_error", None,
                                         f"Unrecognized request URL ({method}: {path}).").body("v1"))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- control API -----------------------------------------------------------
    def _control(self, method, path, query, raw):
        control.handle(self, method, path, query, raw)

    # -- Stripe API ------------------------------------------------------------------
    def _delay(self):
        if not self._delayed:
            self._delayed = True
            seconds = float(self.sb.config.get("latency_ms") or 0) / 1000.0 + self._stall
            if seconds > 0:
                time.sleep(seconds)

    def _api(self, method, path, query, raw):
        sb = self.sb
        family = path[1:3]
        sb.begin_request()
        try:
            try:
                result = self._api_inner(method, path, query, raw, family)
            except ApiError as e:
                self._delay()
                hdrs = dict(e.headers)
                result = (e.status, e.body(family), hdrs)
            except Exception:  # a bug in the sandbox: say so, loudly
                traceback.print_exc()
                self._delay()
                result = (500, ApiError(500, "api_error", None,
                                        "Internal sandbox error.").body(family),
                          {"Stripe-Should-Retry": "false"})
            if self._drop_rule:  # a drop_after_commit rule: whatever the answer was
                result = DROP
            elif result is DROP:
                sb.fault("drop_after_commit")
            if result is DROP:
                self._status = "dropped"
                self._drop()
                return
            if result is RESET:
                self._status = "reset"
                self._reset()
                return
            ver = self.headers.get("Stripe-Version")
            if isinstance(result, Raw):
                if ver:
                    result.headers.setdefault("Stripe-Version", ver)
                self._send_bytes(result.status, result.data, result.content_type, result.headers)
                return
            status, body, hdrs = result
            if ver:
                hdrs.setdefault("Stripe-Version", ver)
            self._send(status, body, hdrs)
        finally:
            sb.end_request(self._status if self._status is not None else "error")

    def _api_inner(self, method, path, query, raw, family):
        sb = self.sb
        auth = self.headers.get("Authorization", "")
        m = AUTH_RE.match(auth.strip())
        if not m:
            raise ApiError(401, "invalid_request_error", None,
                           "Invalid API Key provided." if auth else
                           "You did not provide an API key.")
        if auth.strip().split(" ", 1)[-1] in sb.config.get("revoked_keys", []):
            raise ApiError(401, "invalid_request_error", "api_key_expired", "Expired API Key provided.")
        livemode = m.group(1) == "live"
        key = self.headers.get("Idempotency-Key")
        retry = method == "POST" and key is not None and idempotency.note_key(sb, family, key)
        rule = sb.match_fault_rule(method, path, retry)
        if rule is not None:
            action = rule["action"]
            if action == "reset":
                return RESET
            if action == "stall":
                self._stall = float(rule["seconds"])
            elif action == "drop_after_commit":
                self._drop_rule = True
            else:
                answer = faults.rule_response(rule, family)
                if isinstance(answer, ApiError):
                    raise answer
                return answer
        if not sb.take_token():
            sb.fault("rate_limit")
            raise faults.rate_limited("global-rate", "sandbox rate limit")
        if sb.roll("fail_429"):
            sb.fault("fail_429")
            raise faults.rate_limited(sb.fail_429_reason(), "injected")
        if sb.roll("fail_5xx"):
            sb.fault("fail_5xx")
            raise ApiError(500, "api_error", None,
                           "An unknown error occurred (injected); nothing was done.",
                           headers={"Stripe-Should-Retry": "true"})
        if family == "v2":
            ver = self.headers.get("Stripe-Version", "")
            if not ver:
                raise ApiError(400, "invalid_request_error", "missing_api_version",
                               "The Stripe-Version header is required for v2 requests.")
            if path.startswith("/v2/money_management/") and not ver.endswith(".preview"):
                raise ApiError(400, "invalid_request_error", "invalid_api_version",
                               f"Money management requires a preview API version "
                               f"(ending in .preview); got {ver!r}.")
        route = routes.match(method, path)
        if route is None:
            raise ApiError(404, "invalid_request_error", None,
                           f"Unrecognized request URL ({method}: {path}).")
        name, groups = route
        handler = getattr(sb, name)
        ctx = {"livemode": livemode, "idempotency_key": key if method == "POST" else None,
               "stripe_context": self.headers.get("Stripe-Context"), "family": family}
        if method != "POST":
            params = parse_form(query)
            self._delay()
            with sb.lock:
                status, body = handler(params, ctx, *groups)
            return status, body, {}

        # POST: parse, then idempotency
        if family == "v1":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise bad_param("parameter_invalid", "The request body is not UTF-8.", None)
            params = parse_form(text)
        else:
            try:
                params = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise ApiError(400, "invalid_request_error", "invalid_fields",
                               "The request body is not valid JSON.")
        if key is not None:
            idempotency.check_key(key)
            replay = idempotency.claim(sb, family, key, method, path, params)
            if replay is not None:
                self._delay()
                return replay
        self._delay()  # the request "executes" while its key is held: 409 territory
        saved = True
        try:
            with sb.lock:
                try:
                    status, body = handler(params, ctx, *groups)
                except ApiError as e:
                    status, body = e.status, e.body(family)
                    saved = e.save and family == "v1"
        except BaseException:
            if key is not None:
                idempotency.release(sb, family, key)
            raise
        headers = {"Idempotency-Key": key} if key is not None else {}
        if key is not None:
            if saved:
                idempotency.commit(sb, family, key, status, body)
            else:
                idempotency.release(sb, family, key)
        if 200 <= status < 300 and sb.roll("drop_after_commit"):
            return DROP
        return status, body, headers


class SandboxServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True
