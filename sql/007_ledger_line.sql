-- A cart is one order of several lines: the ledger keeps one row per line,
-- numbered from 0 in the order the request gave them (a single-SKU sale is
-- line 0). The order id stays the idempotency key: (order_id, line) is
-- unique, so a repeat of the order can write none of its lines again, and
-- a single-SKU sale under a cart's order id collides on line 0.
-- Safe to apply twice, on MariaDB and MySQL 8 alike (guarded by
-- information_schema); the new key is made before the old one goes, so
-- order ids stay unique at every step.
USE db_shopping;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'ledger' AND column_name = 'line');
SET @ddl := IF(@need, 'ALTER TABLE ledger ADD COLUMN line SMALLINT NOT NULL DEFAULT 0 AFTER order_id', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.statistics WHERE table_schema = 'db_shopping'
              AND table_name = 'ledger' AND index_name = 'uq_ledger_order_line');
SET @ddl := IF(@need, 'ALTER TABLE ledger ADD UNIQUE KEY uq_ledger_order_line (order_id, line)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

SET @need := (SELECT COUNT(*) > 0 FROM information_schema.statistics WHERE table_schema = 'db_shopping'
              AND table_name = 'ledger' AND index_name = 'uq_ledger_order');
SET @ddl := IF(@need, 'ALTER TABLE ledger DROP KEY uq_ledger_order', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
