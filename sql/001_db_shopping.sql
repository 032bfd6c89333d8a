-- Inventory side (the seeds' db_shopping): stock rows, the ledger every
-- audit is built on, Redis-free lock table. Safe to apply twice.
CREATE DATABASE IF NOT EXISTS db_shopping CHARACTER SET utf8mb4;
USE db_shopping;

-- One row per SKU. `initial` is the stock set by the last seed: the audit
-- compares what was sold against it. `version` serves the optimistic guard.
CREATE TABLE IF NOT EXISTS inventory (
    sku        VARCHAR(64)  NOT NULL PRIMARY KEY,
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
    order_id   VARCHAR(64)  NOT NULL,
    sku        VARCHAR(64)  NOT NULL,
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
    lock_name  VARCHAR(128) NOT NULL PRIMARY KEY,
    owner      VARCHAR(128) NOT NULL,
    expires_at TIMESTAMP(3) NOT NULL
) ENGINE=InnoDB;
