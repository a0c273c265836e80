import TestSupport
@testable import URLLoading

extension Routes {
    /// A resource behind RFC 7616 Digest (SHA-256, qop=auth) with a fixed
    /// nonce, the server's side computed here (§3.4.1): 401 with a challenge
    /// without a Digest answer for the nonce, 403 for a wrong response, and
    /// `then(nc)` (the request's nonce count) for a right one.
    static func digest(
        realm: String, user: String, password: String, nonce: String,
        then: @escaping @Sendable (_ nc: String) -> ScriptedResponse
    ) -> TestOrigin.Handler {
        { request in
            guard let field = request.header("Authorization"), let challenge = AuthChallenge.parse([field]).first,
                challenge.isScheme("Digest"), challenge[parameter: "nonce"] == nonce,
                let nc = challenge[parameter: "nc"], let cnonce = challenge[parameter: "cnonce"], let uri = challenge[parameter: "uri"]
            else {
                return ScriptedResponse(
                    status: 401,
                    headers: [
                        HeaderField(
                            "WWW-Authenticate", "Digest realm=\"\(realm)\", qop=\"auth\", algorithm=SHA-256, nonce=\"\(nonce)\", opaque=\"xyz\"")
                    ], body: "")
            }
            func h(_ text: String) -> String { Hex.string(SHA256.hash(Array(text.utf8))) }
            let expected = h("\(h("\(user):\(realm):\(password)")):\(nonce):\(nc):\(cnonce):auth:\(h("\(request.method):\(uri)"))")
            guard challenge[parameter: "response"] == expected else { return ScriptedResponse(status: 403, body: "bad digest") }
            return then(nc)
        }
    }
}
