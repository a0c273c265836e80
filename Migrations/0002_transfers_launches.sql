-- Launch events are bounded: how many times transferd ran
-- a session's launch command since its app last attached. `launched` (0001)
-- holds when it last did. Both are reset when the app attaches.
ALTER TABLE sessions ADD COLUMN launches INTEGER NOT NULL DEFAULT 0;
-- The folder of the session's persistent credential store:
-- its default credentials answer a challenge when no app is attached.
ALTER TABLE sessions ADD COLUMN credential_store TEXT;
