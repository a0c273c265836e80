package import Storage

/// The schema of each store, in version order (see README.md in this folder).
package enum Schema {
    // SwiftPM names an embedded file by replacing its first character when it
    // is a digit: `0001_x.sql` becomes `_001_x_sql`.

    /// The disk tier of the response cache.
    package static let cache: [Migration] = [
        Migration(version: 1, name: "cache_create", sql: text(PackageResources._001_cache_create_sql)),
        Migration(version: 2, name: "cache_lru_by_id", sql: text(PackageResources._002_cache_lru_by_id_sql)),
        Migration(version: 3, name: "cache_usage_watermark", sql: text(PackageResources._003_cache_usage_watermark_sql)),
    ]

    /// The persistent cookie store.
    package static let cookies: [Migration] = [
        Migration(version: 1, name: "cookies_create", sql: text(PackageResources._001_cookies_create_sql)),
        Migration(version: 2, name: "cookies_rfc2965", sql: text(PackageResources._002_cookies_rfc2965_sql)),
    ]

    /// The persistent credential store.
    package static let credentials: [Migration] = [
        Migration(version: 1, name: "credentials_create", sql: text(PackageResources._001_credentials_create_sql))
    ]

    /// transferd's journal of background transfers.
    package static let transfers: [Migration] = [
        Migration(version: 1, name: "transfers_create", sql: text(PackageResources._001_transfers_create_sql)),
        Migration(version: 2, name: "transfers_launches", sql: text(PackageResources._002_transfers_launches_sql)),
        Migration(version: 3, name: "transfers_upload_resume", sql: text(PackageResources._003_transfers_upload_resume_sql)),
    ]

    private static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
