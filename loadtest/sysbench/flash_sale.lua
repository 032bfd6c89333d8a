#!/usr/bin/env sysbench
-- The classic flash-sale benchmark: every event is one autocommitted
--   UPDATE flash_sale SET stock = stock - 1 WHERE id = 1 AND stock > 0
-- on a single hot row, so the rate is the database's own ceiling for a
-- sale that is nothing but its conditional decrement (no ledger row, no
-- HTTP): the row lock handed from commit to commit, one durable COMMIT per
-- sale unless innodb_flush_log_at_trx_commit says otherwise. loadtest/bench
-- (section 9) runs it against the stack's MariaDB:
--   sysbench loadtest/sysbench/flash_sale.lua --db-driver=mysql \
--     --mysql-host=127.0.0.1 --mysql-port=P --mysql-user=root \
--     --mysql-db=bench_ceiling --threads=16 --time=5 prepare|run|cleanup
-- "transactions" in its report are events, i.e. decrements.

sysbench.cmdline.options = {
    stock = {"units in the hot row at prepare (never runs out in a bench)", 1000000000000},
}

function prepare()
    local con = sysbench.sql.driver():connect()
    con:query("CREATE TABLE IF NOT EXISTS flash_sale (id INT NOT NULL PRIMARY KEY, " ..
              "stock BIGINT NOT NULL) ENGINE=InnoDB")
    con:query("REPLACE INTO flash_sale (id, stock) VALUES (1, " .. sysbench.opt.stock .. ")")
    con:disconnect()
end

function cleanup()
    local con = sysbench.sql.driver():connect()
    con:query("DROP TABLE IF EXISTS flash_sale")
    con:disconnect()
end

function thread_init()
    drv = sysbench.sql.driver()
    con = drv:connect()
    sale = con:prepare("UPDATE flash_sale SET stock = stock - 1 WHERE id = 1 AND stock > 0")
end

function event()
    sale:execute()
end

function thread_done()
    sale:close()
    con:disconnect()
end
