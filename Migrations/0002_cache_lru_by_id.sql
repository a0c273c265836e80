-- The row id is the LRU order. A store takes the next id and a
-- touch (written in batches, at most once a minute per entry) moves its row
-- to the next id, so eviction reads the table from its first row and no
-- index on last_used is written with every store: one page fewer in each
-- store's transaction. last_used stays, for `cachetool list` and stats.
--
-- The rows are renumbered in their order of use; the triggers go with the
-- old table and are made again. The usage row holds for the same rows.
CREATE TABLE entries_by_use(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    variant TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL,
    host TEXT NOT NULL,
    status INTEGER NOT NULL,
    response_headers BLOB NOT NULL,
    request_headers BLOB NOT NULL,
    body BLOB,
    body_file TEXT,
    body_size INTEGER NOT NULL,
    cost INTEGER NOT NULL,
    request_time REAL NOT NULL,
    response_time REAL NOT NULL,
    stored_at REAL NOT NULL,
    last_used REAL NOT NULL,
    storage_policy INTEGER NOT NULL,
    user_info BLOB,
    UNIQUE(key, variant)
);
INSERT INTO entries_by_use(key, variant, url, host, status, response_headers, request_headers, body, body_file,
    body_size, cost, request_time, response_time, stored_at, last_used, storage_policy, user_info)
SELECT key, variant, url, host, status, response_headers, request_headers, body, body_file,
    body_size, cost, request_time, response_time, stored_at, last_used, storage_policy, user_info
FROM entries ORDER BY last_used, id;
DROP TABLE entries;
ALTER TABLE entries_by_use RENAME TO entries;
CREATE TRIGGER entries_insert AFTER INSERT ON entries BEGIN
    UPDATE usage SET entries = entries + 1, bytes = bytes + NEW.cost WHERE id = 1;
END;
CREATE TRIGGER entries_delete AFTER DELETE ON entries BEGIN
    UPDATE usage SET entries = entries - 1, bytes = bytes - OLD.cost WHERE id = 1;
END;
CREATE TRIGGER entries_update_cost AFTER UPDATE OF cost ON entries BEGIN
    UPDATE usage SET bytes = bytes - OLD.cost + NEW.cost WHERE id = 1;
END;
