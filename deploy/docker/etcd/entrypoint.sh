#!/bin/sh
# Entrypoint of the etcd image (deploy/docker/etcd): one member, clients on
# every interface of the container (port 2379), peers on loopback only,
# data in /data (a volume: durable, etcd fsyncs its WAL). ETCD_NAME and
# ETCD_ADVERTISE (the URL clients are told, default http://<hostname>:2379)
# from the environment; extra etcd flags after the image name.
set -eu
name=${ETCD_NAME:-etcd}
exec etcd --name "$name" --data-dir /data/"$name" \
    --listen-client-urls http://0.0.0.0:2379 \
    --advertise-client-urls "${ETCD_ADVERTISE:-http://$(cat /proc/sys/kernel/hostname):2379}" \
    --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$name=http://127.0.0.1:2380" \
    "$@"
