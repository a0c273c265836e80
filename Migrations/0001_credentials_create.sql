-- The persistent credential store: permanent credentials only.
-- The file has mode 0600 in a 0700 directory and is refused when others
-- can read it. Passwords are stored as given (like ~/.netrc): the file's
-- mode is their protection.
CREATE TABLE credentials(
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    protocol TEXT NOT NULL,
    -- '' when the space has no realm.
    realm TEXT NOT NULL,
    method TEXT NOT NULL,
    is_proxy INTEGER NOT NULL,
    user TEXT NOT NULL,
    password TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    PRIMARY KEY(host, port, protocol, realm, method, is_proxy, user)
) WITHOUT ROWID;
