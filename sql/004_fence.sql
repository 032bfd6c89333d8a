-- Fencing tokens: per lock service, the highest lock token that has
-- claimed a SKU's row, and a token per lock-table take-over. Safe to apply twice, on
-- MariaDB and MySQL 8 alike: each change is guarded by information_schema
-- (no ADD COLUMN IF NOT EXISTS, which MySQL lacks), as in 002_db_order.sql.
USE db_shopping;

-- inventory_fence: per SKU and per lock service (the guard's name), the
-- highest token that has claimed the SKU's row. A fenced write claims it
-- with its token first (fence < token) and then writes only while the fence
-- is still its token, so a lock holder whose lease ran out cannot write
-- behind a newer holder of the SAME lock. Tokens of different lock services
-- are not one order (etcd's cluster-wide revision is far above a ZooKeeper
-- sequence number or a lock-table id), so each keeps its own fence.
-- A reseed deletes the SKU's rows (every fence back to 0).
CREATE TABLE IF NOT EXISTS inventory_fence (
    sku   VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    guard VARCHAR(32)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    fence BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (sku, guard)
) ENGINE=InnoDB;

-- A database from before: its single inventory.fence column mixed the
-- tokens of every guard and cannot be split by guard; it goes (the next
-- fenced write of each guard claims its own row afresh, as after a reseed).
SET @need := (SELECT COUNT(*) > 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'inventory' AND column_name = 'fence');
SET @ddl := IF(@need, 'ALTER TABLE inventory DROP COLUMN fence', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

-- lock_table.id: the lock-table guard's fencing token. AUTO_INCREMENT gives
-- every INSERT (a first take or a take-over of an expired row) a larger id
-- than any before it; InnoDB wants the column indexed, hence the unique key.
SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'lock_table' AND column_name = 'id');
SET @ddl := IF(@need, 'ALTER TABLE lock_table ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY uq_lock_table_id (id)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
