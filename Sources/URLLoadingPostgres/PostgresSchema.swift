import Storage

/// The stores' tables in PostgreSQL, by migrations (`PostgresMigrator`).
enum PostgresSchema {
    /// The HTTP cache: the same columns as the SQLite disk tier's, bodies
    /// inline (`bytea`, stored out of line and uncompressed: bodies are
    /// often compressed already), usage kept exact by triggers.
    static let cache = [
        Migration(
            version: 1, name: "cache_create",
            sql: """
                CREATE TABLE urlloading_cache_entries(
                    id BIGSERIAL PRIMARY KEY,
                    key TEXT NOT NULL,
                    variant TEXT NOT NULL DEFAULT '',
                    url TEXT NOT NULL,
                    host TEXT NOT NULL,
                    status INTEGER NOT NULL,
                    response_headers BYTEA NOT NULL,
                    request_headers BYTEA NOT NULL,
                    body BYTEA NOT NULL,
                    body_size BIGINT NOT NULL,
                    cost BIGINT NOT NULL,
                    request_time DOUBLE PRECISION NOT NULL,
                    response_time DOUBLE PRECISION NOT NULL,
                    stored_at DOUBLE PRECISION NOT NULL,
                    last_used DOUBLE PRECISION NOT NULL,
                    storage_policy INTEGER NOT NULL,
                    user_info BYTEA,
                    UNIQUE (key, variant)
                );
                ALTER TABLE urlloading_cache_entries ALTER COLUMN body SET STORAGE EXTERNAL;
                CREATE INDEX urlloading_cache_by_last_used ON urlloading_cache_entries(last_used, id);
                CREATE TABLE urlloading_cache_usage(
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    entries BIGINT NOT NULL,
                    bytes BIGINT NOT NULL
                );
                INSERT INTO urlloading_cache_usage(id, entries, bytes) VALUES (1, 0, 0);
                CREATE FUNCTION urlloading_cache_usage_keep() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'INSERT' THEN
                        UPDATE urlloading_cache_usage SET entries = entries + 1, bytes = bytes + NEW.cost WHERE id = 1;
                    ELSIF TG_OP = 'DELETE' THEN
                        UPDATE urlloading_cache_usage SET entries = entries - 1, bytes = bytes - OLD.cost WHERE id = 1;
                    ELSIF NEW.cost <> OLD.cost THEN
                        UPDATE urlloading_cache_usage SET bytes = bytes - OLD.cost + NEW.cost WHERE id = 1;
                    END IF;
                    RETURN NULL;
                END $$;
                CREATE TRIGGER urlloading_cache_usage_keep AFTER INSERT OR DELETE OR UPDATE OF cost ON urlloading_cache_entries
                    FOR EACH ROW EXECUTE FUNCTION urlloading_cache_usage_keep();
                CREATE TABLE urlloading_cache_counters(
                    name TEXT PRIMARY KEY,
                    value BIGINT NOT NULL
                );
                """)
    ]

    /// Cookies: one row per name, domain, host-only flag and path (the
    /// jar's identity), so that two workers setting one cookie at once
    /// upsert the same row.
    static let cookies = [
        Migration(
            version: 1, name: "cookies_create",
            sql: """
                CREATE TABLE urlloading_cookies(
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    domain TEXT NOT NULL,
                    host_only BOOLEAN NOT NULL,
                    path TEXT NOT NULL,
                    expires DOUBLE PRECISION,
                    created DOUBLE PRECISION NOT NULL,
                    last_access DOUBLE PRECISION NOT NULL,
                    secure BOOLEAN NOT NULL,
                    http_only BOOLEAN NOT NULL,
                    same_site TEXT NOT NULL,
                    PRIMARY KEY (name, domain, host_only, path)
                );
                """),
        // What Apple's HTTPCookie keeps from RFC 2965 properties: the
        // version, the comment and its URL, the ports (comma-separated; NULL
        // for any port).
        Migration(
            version: 2, name: "cookies_rfc2965",
            sql: """
                ALTER TABLE urlloading_cookies ADD COLUMN version INTEGER NOT NULL DEFAULT 0,
                    ADD COLUMN comment TEXT, ADD COLUMN comment_url TEXT, ADD COLUMN ports TEXT;
                """),
    ]

    /// Credentials: one row per protection space and user, as in the SQLite
    /// file. The table is its creator's: no other role may read it (PUBLIC
    /// is refused everything, in case a database default granted it).
    static let credentials = [
        Migration(
            version: 1, name: "credentials_create",
            sql: """
                CREATE TABLE urlloading_credentials(
                    host TEXT NOT NULL,
                    port INTEGER NOT NULL,
                    protocol TEXT NOT NULL,
                    realm TEXT NOT NULL,
                    method TEXT NOT NULL,
                    is_proxy BOOLEAN NOT NULL,
                    username TEXT NOT NULL,
                    password TEXT NOT NULL,
                    is_default BOOLEAN NOT NULL,
                    created DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (host, port, protocol, realm, method, is_proxy, username)
                );
                REVOKE ALL ON urlloading_credentials FROM PUBLIC;
                """)
    ]
}
