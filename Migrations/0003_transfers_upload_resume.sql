-- A background upload's resume data (URLLoading's upload resume data blob:
-- the resumption URL a server named in its 104, the confirmed offset and
-- the identity of transferd's copy of the body; no secret). A transferd
-- that restarts asks that URL for the offset instead of sending the body
-- again. NULL while the server named none.
ALTER TABLE transfers ADD COLUMN upload_resume BLOB;
