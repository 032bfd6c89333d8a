#!/bin/sh
# Entrypoint of the ZooKeeper image (deploy/docker/zookeeper): writes
# /conf/zoo.cfg from the environment and runs the server in the foreground.
#   ZK_TICK_MS        tickTime (default 500: sessions of 1..10 s, as the lab's)
#   ZK_FORCE_SYNC     yes (default: fsync every log write) or no
#   ZK_HEAP           -Xmx (default 256m)
# Healthcheck: echo srvr | the client port answers "Mode: standalone".
set -eu
cat >/conf/zoo.cfg <<CFG
tickTime=${ZK_TICK_MS:-500}
dataDir=/data
clientPort=2181
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=10000
forceSync=${ZK_FORCE_SYNC:-yes}
CFG
exec java -Xmx"${ZK_HEAP:-256m}" -XX:+UseSerialGC -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain /conf/zoo.cfg
