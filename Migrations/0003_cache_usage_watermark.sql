-- The usage row counts the rows whose id is at most its counted_through;
-- a store (a new row takes the next id, past it) no longer writes the
-- usage row's page, one page in four of a store's transaction. Usage is
-- the row's figures plus the rows past counted_through, a scan of the
-- table's last rows; a writer folds those into the row once there are a
-- few (DiskTier), in the same transaction as a store. The triggers keep
-- the row exact for the rows it counts, in every process, as before:
-- an id at or below counted_through (a deleted row's id taken again, a
-- touched row moved to the end) is counted, or uncounted, as it goes.
ALTER TABLE usage ADD COLUMN counted_through INTEGER NOT NULL DEFAULT 0;
UPDATE usage SET counted_through = (SELECT coalesce(max(id), 0) FROM entries) WHERE id = 1;
DROP TRIGGER entries_insert;
DROP TRIGGER entries_delete;
DROP TRIGGER entries_update_cost;
CREATE TRIGGER entries_insert AFTER INSERT ON entries
WHEN NEW.id <= (SELECT counted_through FROM usage WHERE id = 1) BEGIN
    UPDATE usage SET entries = entries + 1, bytes = bytes + NEW.cost WHERE id = 1;
END;
CREATE TRIGGER entries_delete AFTER DELETE ON entries
WHEN OLD.id <= (SELECT counted_through FROM usage WHERE id = 1) BEGIN
    UPDATE usage SET entries = entries - 1, bytes = bytes - OLD.cost WHERE id = 1;
END;
CREATE TRIGGER entries_update AFTER UPDATE OF id, cost ON entries
WHEN OLD.id <= (SELECT counted_through FROM usage WHERE id = 1)
    OR NEW.id <= (SELECT counted_through FROM usage WHERE id = 1) BEGIN
    UPDATE usage SET
        entries = entries + (NEW.id <= counted_through) - (OLD.id <= counted_through),
        bytes = bytes
            + (CASE WHEN NEW.id <= counted_through THEN NEW.cost ELSE 0 END)
            - (CASE WHEN OLD.id <= counted_through THEN OLD.cost ELSE 0 END)
    WHERE id = 1;
END;
