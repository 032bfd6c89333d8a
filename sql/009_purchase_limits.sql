-- Purchase limits ("at most N per person", the flash-sale rule). Safe to
-- apply twice (each change is made only when missing).
--   inventory.limit_per_user  units one user may hold of the SKU; 0 = none.
--                             Set by the seed (PUT /inventory/{sku}).
--   ledger.user_id            the buyer of each sale ('' when not given):
--                             the audit groups unreleased rows by it to find
--                             users who bought past the limit.
--   user_purchases            per (sku, user_id) the units bought and not
--                             released; moved in the sale's own transaction
--                             by a conditional statement (bought + qty <=
--                             limit), given back by a release, cleared by a
--                             reseed.
USE db_shopping;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'inventory' AND column_name = 'limit_per_user');
SET @ddl := IF(@need, 'ALTER TABLE inventory ADD COLUMN limit_per_user INT NOT NULL DEFAULT 0', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'ledger' AND column_name = 'user_id');
SET @ddl := IF(@need, 'ALTER TABLE ledger ADD COLUMN user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''''', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

CREATE TABLE IF NOT EXISTS user_purchases (
    sku     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    bought  BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (sku, user_id)
) ENGINE=InnoDB;
