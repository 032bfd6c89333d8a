"""Provenance for a report: the machine, the service versions, the commit."""

import os
import platform
import re
import subprocess

from . import ROOT


def cmd_out(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(stack):
    maria = redis = ""
    if stack is not None and stack.mysql_port and stack.redis_port:
        maria = cmd_out(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{stack.mysql_port}", "-uroot",
                         "-N", "-e", "SELECT VERSION()"])
        rinfo = cmd_out(["redis-cli", "-h", "127.0.0.1", "-p", str(stack.redis_port), "INFO", "server"])
        m = re.search(r"redis_version:(\S+)", rinfo)
        redis = f"Redis {m.group(1)}" if m else ""
    if not maria:
        maria = cmd_out(["mariadbd", "--version"]).split(" for ")[0]
    else:
        maria = "MariaDB " + maria
    if not redis:
        m = re.search(r"v=(\S+)", cmd_out(["redis-server", "--version"]))
        redis = f"Redis {m.group(1)}" if m else "Redis ?"
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            mm = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = mm.group(1).strip() if mm else ""
    except OSError:
        pass
    return {"cores": os.cpu_count(), "kernel": platform.release(), "cpu": cpu,
            "mariadb": maria or "MariaDB ?", "redis": redis, "hostname": platform.node()}


def git_rev():
    rev = cmd_out(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"]) or "unknown"
    if cmd_out(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]):
        rev += "+dirty"
    return rev

