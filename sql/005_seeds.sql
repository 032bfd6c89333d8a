-- Reseeds counted per SKU: inventory.seeds goes up by one on
-- every reseed. A lock guard's read-modify-write writes only while the row
-- still has the `seeds` it read, so a sale that read the stock before a
-- reseed (made on any instance) cannot write a value computed from the old
-- stock over the new one. Unlike `version`, a write of another sale does
-- not change it: two holders whose leases overlap still show their lost
-- update in the audit, which is what the lab demonstrates. Safe to apply
-- twice, on MariaDB and MySQL 8 alike (guarded by information_schema).
USE db_shopping;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'inventory' AND column_name = 'seeds');
SET @ddl := IF(@need, 'ALTER TABLE inventory ADD COLUMN seeds BIGINT NOT NULL DEFAULT 0', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
