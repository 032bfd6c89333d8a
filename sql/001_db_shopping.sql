-- Inventory side (the seeds' db_shopping): stock rows, the ledger every
-- audit is built on, Redis-free lock table. Safe to apply twice.
--
-- Identifiers (sku, order_id, lock names) are ASCII with a binary
-- collation: compared as exact bytes, like the Redis keys and lock names
-- built from them. A case-insensitive collation would make "ab-1" the row
-- of "Ab-1" in MySQL but another key in Redis, and sell the stock twice.
-- The services accept only A-Z a-z 0-9 . _ : - in them.
CREATE DATABASE IF NOT EXISTS db_shopping CHARACTER SET utf8mb4;
USE db_shopping;

-- One row per SKU. `initial` is the stock set by the last seed: the audit
-- compares what was sold against it. `version` serves the optimistic guard.
CREATE TABLE IF NOT EXISTS inventory (
    sku        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    stock      BIGINT       NOT NULL,
    initial    BIGINT       NOT NULL,
    version    BIGINT       NOT NULL DEFAULT 0,
    segments   INT          NOT NULL DEFAULT 0,
    updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
                            ON UPDATE CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB;

-- One row per recorded deduction. The unique order_id is what makes a
-- repeated request idempotent; `released` rows were given back.
CREATE TABLE IF NOT EXISTS ledger (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id   VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sku        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    qty        INT          NOT NULL,
    remaining  BIGINT       NOT NULL,
    guard      VARCHAR(32)  NOT NULL,
    instance   VARCHAR(64)  NOT NULL,
    released   TINYINT(1)   NOT NULL DEFAULT 0,
    created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    UNIQUE KEY uq_ledger_order (order_id),
    KEY ix_ledger_sku (sku, released)
) ENGINE=InnoDB;

-- Database lock table (the `lock-table` guard): holding the lock is owning
-- the row; expires_at lets a crashed holder's lock be taken over.
CREATE TABLE IF NOT EXISTS lock_table (
    lock_name  VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    owner      VARCHAR(128) NOT NULL,
    expires_at TIMESTAMP(3) NOT NULL
) ENGINE=InnoDB;

-- Databases made before identifiers were exact bytes: convert in place
-- (a no-op when already done).
ALTER TABLE inventory  MODIFY sku       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE ledger     MODIFY order_id  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
                       MODIFY sku       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE lock_table MODIFY lock_name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
