-- The disk tier of ResponseCache.
-- One row per stored response; (key, variant) is the cache key of RFC 9111 §2
-- plus the secondary key of §4.1 (the request's values of the Vary fields).
CREATE TABLE entries(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    variant TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL,
    host TEXT NOT NULL,
    status INTEGER NOT NULL,
    -- Encoded header lists (see DiskTier): the response's, and the request's
    -- fields that Vary selects on.
    response_headers BLOB NOT NULL,
    request_headers BLOB NOT NULL,
    -- The body: inline below the size threshold, else in a file named
    -- body_file beside the database (written completely before this row).
    body BLOB,
    body_file TEXT,
    body_size INTEGER NOT NULL,
    -- Bytes this entry counts against diskCapacity.
    cost INTEGER NOT NULL,
    request_time REAL NOT NULL,
    response_time REAL NOT NULL,
    stored_at REAL NOT NULL,
    last_used REAL NOT NULL,
    storage_policy INTEGER NOT NULL,
    user_info BLOB,
    UNIQUE(key, variant)
);
-- Eviction takes the least recently used rows in order. No other index:
-- every index is one more page written per store, and pruning by date or
-- host is rare enough to scan.
CREATE INDEX entries_by_last_used ON entries(last_used);

-- Exact usage, kept by triggers so it stays true across processes and
-- restarts without scanning the table.
CREATE TABLE usage(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    entries INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT INTO usage(id, entries, bytes) VALUES (1, 0, 0);
CREATE TRIGGER entries_insert AFTER INSERT ON entries BEGIN
    UPDATE usage SET entries = entries + 1, bytes = bytes + NEW.cost WHERE id = 1;
END;
CREATE TRIGGER entries_delete AFTER DELETE ON entries BEGIN
    UPDATE usage SET entries = entries - 1, bytes = bytes - OLD.cost WHERE id = 1;
END;
CREATE TRIGGER entries_update_cost AFTER UPDATE OF cost ON entries BEGIN
    UPDATE usage SET bytes = bytes - OLD.cost + NEW.cost WHERE id = 1;
END;

-- Counters kept by the library for `cachetool stats` (hits, misses, ...).
CREATE TABLE counters(
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;

-- Body files written but not yet referenced by a row; a crash between the
-- two leaves a name here for the next open to delete.
CREATE TABLE pending_files(
    name TEXT PRIMARY KEY,
    created REAL NOT NULL
) WITHOUT ROWID;
