-- cart_lines: the lines of a cart order (POST /orders with "lines"): the order's lines
-- as the order service compares them, a compact JSON array
-- [{"sku":"A","qty":1}, ...] in the client's order; NULL for an order of
-- one SKU. Such an order's sku is its line 0's and its qty the units of all
-- its lines. Safe to apply twice (the column is added only when missing).
CREATE DATABASE IF NOT EXISTS db_order CHARACTER SET utf8mb4;
USE db_order;

SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_order'
              AND table_name = 'orders' AND column_name = 'cart_lines');
SET @ddl := IF(@need, 'ALTER TABLE orders ADD COLUMN cart_lines TEXT NULL DEFAULT NULL', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
