-- transferd's journal: one row per background task,
-- written before transferd acts on a change, so a transferd killed at any
-- moment finds each task where it was. The file is 0600 in a 0700 folder
-- and refused when others can read it: requests keep their Authorization
-- and Cookie values here as the credential store keeps passwords.
CREATE TABLE sessions(
    identifier TEXT PRIMARY KEY,
    next_task INTEGER NOT NULL DEFAULT 1,
    -- JSON array: the program and arguments run when events wait and no
    -- session is attached; NULL when the session sends no launch events.
    launch_command TEXT,
    launched REAL
) WITHOUT ROWID;

CREATE TABLE transfers(
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    task INTEGER NOT NULL,
    -- JSON of the task as the app made it (TaskSpec): kind, request, dates.
    spec TEXT NOT NULL,
    -- waiting | asking | queued | running | retrying | finished | delivered
    phase TEXT NOT NULL,
    -- The begin date (waiting) or the retry date (retrying).
    phase_date REAL,
    -- succeeded | failed | cancelled, when finished.
    outcome TEXT,
    suspended INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- Body bytes in the partial file (a download) or sent (an upload).
    bytes INTEGER NOT NULL DEFAULT 0,
    expected INTEGER NOT NULL DEFAULT -1,
    -- The ETag, else Last-Modified, of the partial body (If-Range).
    validator TEXT,
    -- JSON of the final response head (ResponseSpec).
    response TEXT,
    -- An upload's response body (bounded).
    response_body BLOB,
    error_code TEXT,
    error_message TEXT,
    created REAL NOT NULL,
    finished REAL,
    UNIQUE(session, task)
);
CREATE INDEX transfers_by_phase ON transfers(phase);
