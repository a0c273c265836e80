-- Launch events are bounded (issue 35 item 3): how many times transferd ran
-- a session's launch command since its app last attached. `launched` (0001)
-- holds when it last did. Both are reset when the app attaches.
ALTER TABLE sessions ADD COLUMN launches INTEGER NOT NULL DEFAULT 0;
