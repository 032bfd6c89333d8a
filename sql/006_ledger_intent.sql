-- The id of the sale that wrote a ledger row, when its guard gives its
-- sales one (redis-decr: the intent nonce of the Redis decision). Whoever
-- settles a sale its instance never answered (killed between the Redis
-- decision and the MySQL write) asks whether THAT sale landed: a row of the
-- same order_id written by another sale (a repeat's first sale) is not it.
-- Safe to apply twice, on MariaDB and MySQL 8 alike (guarded by
-- information_schema).
USE db_shopping;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'ledger' AND column_name = 'intent');
SET @ddl := IF(@need, 'ALTER TABLE ledger ADD COLUMN intent VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin NULL DEFAULT NULL', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
