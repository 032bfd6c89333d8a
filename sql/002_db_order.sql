-- Order side (the seeds' db_order). Safe to apply twice, and on a database
-- made by an older version of this file (it is brought up to date below).
-- Portable to MySQL 8 (docker-compose.mysql8.yml) and MariaDB: no ADD COLUMN IF NOT EXISTS,
-- which MySQL lacks; each change is guarded by information_schema instead.
CREATE DATABASE IF NOT EXISTS db_order CHARACTER SET utf8mb4;
USE db_order;

-- One row per order, written BEFORE the deduction (status 'pending') and
-- finalised after it, so a crash or a timeout between the two leaves a
-- row the reconciler can settle. Identifiers are VARBINARY: compared as
-- exact bytes (no case folding, no trailing-space padding), like the
-- inventory's ledger and Redis keys.
--   status: pending   intent recorded, deduction not answered yet
--           releasing a release of its stock is under way (compensation or
--                     reconciler); never becomes placed again
--           placed    sold and recorded: the only status that counts
--           cancelled stock was taken and given back
--           failed    no stock was taken
--           awaiting_payment  the inventory holds the units (pay_within_ms)
--                     until deadline_at; paid  the hold was confirmed (a
--                     sale, counted as placed); expired  never paid in time
--   deadline_at: end of the order's budget (database clock); a pending row
--           past it plus the reconciler's margin is released.
CREATE TABLE IF NOT EXISTS orders (
    order_id           VARBINARY(64) NOT NULL PRIMARY KEY,
    user_id            VARBINARY(64) NOT NULL,
    sku                VARBINARY(64) NOT NULL,
    qty                INT          NOT NULL,
    guard              VARCHAR(32)  NOT NULL,
    inventory_instance VARCHAR(64)  NOT NULL,
    created_at         TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    status             VARCHAR(16)  NOT NULL DEFAULT 'placed',
    deadline_at        TIMESTAMP(3) NULL DEFAULT NULL,
    remaining          BIGINT       NULL DEFAULT NULL,
    updated_at         TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
                                    ON UPDATE CURRENT_TIMESTAMP(3),
    KEY ix_orders_sku (sku),
    KEY ix_orders_status (status, order_id)
) ENGINE=InnoDB;

-- Upgrade a table from before the pending-row flow. Existing rows were only
-- ever written after a successful deduction, hence DEFAULT 'placed'.
SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name = 'status');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT ''placed''', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name = 'deadline_at');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD COLUMN deadline_at TIMESTAMP(3) NULL DEFAULT NULL', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name = 'remaining');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD COLUMN remaining BIGINT NULL DEFAULT NULL', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name = 'updated_at');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD COLUMN updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.statistics WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND index_name = 'ix_orders_status');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD KEY ix_orders_status (status, order_id)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

-- Exact bytes for identifiers on a table that still has text columns.
SET @need := (SELECT COUNT(*) > 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name IN ('order_id', 'user_id', 'sku')
              AND data_type <> 'varbinary');
SET @ddl := IF(@need, 'ALTER TABLE orders MODIFY order_id VARBINARY(64) NOT NULL, MODIFY user_id VARBINARY(64) NOT NULL, MODIFY sku VARBINARY(64) NOT NULL', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
