-- The persistent cookie store.
-- One row per cookie; a cookie's identity is (name, domain, host_only, path),
-- as in RFC 6265bis §5.7: a new cookie with the same four replaces the row.
-- Lookups are served from memory (the store loads every row when it opens),
-- so no index beyond the key: the table is only read whole.
CREATE TABLE cookies(
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    -- Lower case, ASCII (punycode), no leading dot.
    domain TEXT NOT NULL,
    host_only INTEGER NOT NULL,
    path TEXT NOT NULL,
    -- Seconds since 1970; NULL for a session cookie.
    expires REAL,
    created REAL NOT NULL,
    last_access REAL NOT NULL,
    secure INTEGER NOT NULL,
    http_only INTEGER NOT NULL,
    -- 'unspecified', 'none', 'lax' or 'strict'.
    same_site TEXT NOT NULL,
    PRIMARY KEY(name, domain, host_only, path)
) WITHOUT ROWID;
