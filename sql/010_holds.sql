-- Holds (POST /inventory/reserve, /confirm): units taken from stock at
-- checkout and kept for one order until it pays (confirmed: a ledger row
-- is written) or its deadline passes (expired: a sweeper gives the units
-- back). Every move is one conditional state transition on the order's
-- rows, so a confirm racing the sweeper is decided once. A cart's hold is
-- one row per (order_id, sku), its lines summed per SKU; the rows of an
-- order share state, guard, user_id and expires_at and move together (one
-- UPDATE ... WHERE order_id). Safe to apply twice.
--   state:        held | confirmed | released | expired
--   expires_at:   the DB clock's deadline (NOW(3) + ttl_ms at reserve)
--   fresh:        1 when a late confirm took new units after the sweep
--   user_id:      the buyer ('' none); on a SKU with limit_per_user a live
--                 hold counts in user_purchases as a sale does, and its
--                 confirm's ledger row carries it
--   confirmed_at: when the confirm committed (the audit checks it against
--                 expires_at: a confirm past the deadline of units already
--                 given back is an oversell)
USE db_shopping;

CREATE TABLE IF NOT EXISTS holds (
    order_id     VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sku          VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    qty          INT          NOT NULL,
    state        VARCHAR(16)  NOT NULL,
    guard        VARCHAR(32)  NOT NULL,
    instance     VARCHAR(64)  NOT NULL,
    user_id      VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    created_at   TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    expires_at   TIMESTAMP(3) NOT NULL,
    confirmed_at TIMESTAMP(3) NULL DEFAULT NULL,
    fresh        TINYINT(1)   NOT NULL DEFAULT 0,
    PRIMARY KEY (order_id, sku),
    KEY ix_holds_expiry (state, expires_at),
    KEY ix_holds_sku (sku, state)
) ENGINE=InnoDB;

-- A holds table made before user_id: the column added once.
SET @need := (SELECT COUNT(*) = 0 FROM information_schema.columns WHERE table_schema = 'db_shopping'
              AND table_name = 'holds' AND column_name = 'user_id');
SET @ddl := IF(@need, 'ALTER TABLE holds ADD COLUMN user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '''' AFTER instance', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;

-- A holds table keyed by order_id alone (before carts): the key widened once.
SET @need := (SELECT COUNT(*) = 1 FROM information_schema.key_column_usage WHERE table_schema = 'db_shopping'
              AND table_name = 'holds' AND constraint_name = 'PRIMARY');
SET @ddl := IF(@need, 'ALTER TABLE holds DROP PRIMARY KEY, ADD PRIMARY KEY (order_id, sku)', 'DO 0');
PREPARE st FROM @ddl; EXECUTE st; DEALLOCATE PREPARE st;
