-- The attributes Apple's HTTPCookie keeps from RFC 2965 properties, so a
-- cookie made from them reads back the same: its version (0 or 1), the
-- comment and comment URL for the user, and the ports it may be sent to
-- (comma-separated; NULL for any port).
ALTER TABLE cookies ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cookies ADD COLUMN comment TEXT;
ALTER TABLE cookies ADD COLUMN comment_url TEXT;
ALTER TABLE cookies ADD COLUMN ports TEXT;
