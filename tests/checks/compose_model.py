"""Reading services out of `docker-compose config` output, shared by the
test_compose_*.sh checks (they run from the repository root)."""


def role_of(svc):
    """The binary a service runs: the first word of its command, or None."""
    cmd = svc.get("command") or []
    if isinstance(cmd, str):
        cmd = cmd.split()
    return cmd[0] if cmd else None


def env_of(svc):
    """A service's environment as a dict, whichever form the file used."""
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
    return env
