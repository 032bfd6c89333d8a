-- Idempotency keys of POST /orders (the Idempotency-Key header): one row
-- per key, kept at least 24 h (expires_at), purged by the order service's
-- reconciler after that. Safe to apply twice (CREATE ... IF NOT EXISTS).
--   request:      the request as the service compares it (canonical JSON of
--                 the body and the X-Guard header): the same key with
--                 another request is refused (422)
--   order_id:     the order the key stands for, fixed by the first request:
--                 every repeat of the key places that same order
--   state:        in_flight  a request holds the key until locked_until
--                 open       the last attempt had no final answer (5xx):
--                            the next repeat runs the same order again
--                 done       answer_status and answer are replayed as is
CREATE DATABASE IF NOT EXISTS db_order CHARACTER SET utf8mb4;
USE db_order;

CREATE TABLE IF NOT EXISTS idempotency_keys (
    idem_key      VARBINARY(255) NOT NULL PRIMARY KEY,
    request       MEDIUMBLOB     NOT NULL,
    order_id      VARBINARY(64)  NOT NULL,
    state         VARCHAR(16)    NOT NULL,
    locked_until  TIMESTAMP(3)   NULL DEFAULT NULL,
    answer_status INT            NULL DEFAULT NULL,
    answer        MEDIUMBLOB     NULL,
    created_at    TIMESTAMP(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    expires_at    TIMESTAMP(3)   NOT NULL,
    KEY ix_idempotency_expires (expires_at)
) ENGINE=InnoDB;
