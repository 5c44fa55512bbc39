import Testing

@testable import SettleHTTP

/// What the client hides of the request's key in an answer, before anything reads it.
@Suite struct CredentialTests {
    static let key = Array("sk_test_51SECRETkeyVALUE0123456789".utf8)

    func scrubbed(_ text: String) -> String {
        String(decoding: Credential.scrub(Array(text.utf8), secret: Self.key), as: UTF8.self)
    }

    /// Audit 14: a JSON body that spells the key with `\u` escapes decoded to the key after the
    /// scrub (results.csv, errors.csv, report.html, the ledger); a key cut short by a few
    /// characters was not the key, and was written as it was.
    @Test func escapedAndShortenedKeysAreRedactedAndStripesMaskedFormIsKept() {
        #expect(
            scrubbed(#"{"message": "key sk_test_51SECRETkeyVALUE0123456789"}"#) == #"{"message": "key [redacted]"}"#)
        #expect(
            scrubbed(#"{"message": "key \u0073k_test_51SECRETkeyVALUE0123456789"}"#)
                == #"{"message": "key [redacted]"}"#)
        #expect(
            scrubbed(#"{"m": "\u0073\u006B\u005f\u0074est_51SECRETkeyVALUE0123456789!"}"#) == #"{"m": "[redacted]!"}"#)
        #expect(scrubbed("key=sk_test_51SECRETkeyVALUE012345678&x") == "key=[redacted]&x")
        #expect(scrubbed("sk_test_51SECRETk…") == "[redacted]…")
        // Fewer than 16 of its first characters, as Stripe masks a key: kept.
        #expect(
            scrubbed("Invalid API Key provided: sk_test_51SE**********6789")
                == "Invalid API Key provided: sk_test_51SE**********6789")
        // An escaped backslash before "u0073" is not an escape: the text stays as it is.
        #expect(scrubbed(#"{"m": "a\\u0073b"}"#) == #"{"m": "a\\u0073b"}"#)
        #expect(scrubbed(#"{"m": "\n\"q\" \u00e9"}"#) == #"{"m": "\n\"q\" \u00e9"}"#)
    }
}
