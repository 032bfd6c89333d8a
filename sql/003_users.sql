-- The services' own MySQL account: rows in and out of the lab's two schemas,
-- nothing else (no DROP, no ALTER, no GRANT, no FILE, no other schema).
-- Root stays for schema setup (the files before this one). Safe to apply
-- twice.
--
-- Password: the session variable @lab_app_password when the applier sets it
-- (deploy/local/stack generates one per stack folder and runs
-- `SET @lab_app_password=...` before each file); when unset, an account that
-- already exists keeps its password (docker compose: the mysql image creates
-- the account first from MYSQL_USER/MYSQL_PASSWORD), and a new one gets
-- 'lab_app' -- a development default, change it anywhere reachable.
SET @lab_pw = COALESCE(@lab_app_password, 'lab_app');
SET @lab_sql = CONCAT('CREATE USER IF NOT EXISTS ''lab_app''@''%'' IDENTIFIED BY ',
                      QUOTE(@lab_pw));
PREPARE lab_stmt FROM @lab_sql;
EXECUTE lab_stmt;
DEALLOCATE PREPARE lab_stmt;

-- A re-applied file with a new password (a new stack folder over an old
-- data directory) moves the account to it; without one, nothing changes.
SET @lab_sql = IF(@lab_app_password IS NULL, 'DO 0',
                  CONCAT('ALTER USER ''lab_app''@''%'' IDENTIFIED BY ', QUOTE(@lab_pw)));
PREPARE lab_stmt FROM @lab_sql;
EXECUTE lab_stmt;
DEALLOCATE PREPARE lab_stmt;

-- CREATE TEMPORARY TABLES: the portable SQL path (--sql-dialect mysql, and
-- auto on MySQL 8) keeps a one-row temporary table per connection that
-- marks its open transaction (lib/base/db.h, DB_TXN_MARK); a temporary
-- table is the session's own, invisible to every other one.
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE TEMPORARY TABLES ON db_shopping.* TO 'lab_app'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON db_order.* TO 'lab_app'@'%';
