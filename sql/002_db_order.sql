-- Order side (the seeds' db_order). Safe to apply twice.
CREATE DATABASE IF NOT EXISTS db_order CHARACTER SET utf8mb4;
USE db_order;

CREATE TABLE IF NOT EXISTS orders (
    order_id           VARCHAR(64)  NOT NULL PRIMARY KEY,
    user_id            VARCHAR(64)  NOT NULL,
    sku                VARCHAR(64)  NOT NULL,
    qty                INT          NOT NULL,
    guard              VARCHAR(32)  NOT NULL,
    inventory_instance VARCHAR(64)  NOT NULL,
    created_at         TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    KEY ix_orders_sku (sku)
) ENGINE=InnoDB;
