-- Fencing tokens (issue 10): the highest lock token that has written a
-- SKU's row, and a token per lock-table take-over. Safe to apply twice, on
-- MariaDB and MySQL 8 alike: each change is guarded by information_schema
-- (no ADD COLUMN IF NOT EXISTS, which MySQL lacks), as in 002_db_order.sql.
USE db_shopping;

-- inventory.fence: a fenced write claims the row with its token first
-- (fence < token) and then writes only while fence still equals it, so a
-- lock holder whose lease ran out cannot write behind a newer holder.
-- A reseed puts it back to 0.
SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'inventory' AND column_name = 'fence');
SET @ddl := IF(@need, 'ALTER TABLE inventory ADD COLUMN fence BIGINT UNSIGNED NOT NULL DEFAULT 0', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

-- lock_table.id: the lock-table guard's fencing token. AUTO_INCREMENT gives
-- every INSERT (a first take or a take-over of an expired row) a larger id
-- than any before it; InnoDB wants the column indexed, hence the unique key.
SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'lock_table' AND column_name = 'id');
SET @ddl := IF(@need, 'ALTER TABLE lock_table ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY uq_lock_table_id (id)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
