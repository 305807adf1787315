#!/usr/bin/env python3
"""Is JupyterLab answering? Exit 0 and one line when its REST API answers, else exit 1 and one
line why.

The Dockerfile's HEALTHCHECK runs it inside the container. The token reaches JupyterLab through
the environment (JUPYTER_TOKEN, never the command line), and this script reads it from there:
with a token it asks GET /api/status with it, which also proves the server accepts that token;
without one (Jupyter then made its own random token) it asks GET /api, which needs none and
answers with the server's version. Standard library only.

Usage: healthcheck.py [--host HOST] [--port PORT] [--base-url PATH] [--timeout SECONDS]
  (defaults: 127.0.0.1, $PORT or 8888, /, 5)
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def port_number(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1-65535)")
    return value


def seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def check(url, token, timeout):
    """(healthy, one line) for GET url, with the token when there is one."""
    request = urllib.request.Request(
        url, headers={"Authorization": f"token {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        why = " (the token in JUPYTER_TOKEN is not the server's)" if e.code in (401, 403) else ""
        return False, f"{url} answered HTTP {e.code}{why}"
    except (urllib.error.URLError, OSError) as e:
        return False, f"nothing answers at {url}: {getattr(e, 'reason', e)}"
    except ValueError:
        return False, f"{url} answered, but not with JSON (is it JupyterLab?)"
    if token:
        if "started" not in body:
            return False, f"{url} answered without a 'started' field (is it JupyterLab?)"
        return True, (
            f"{url}: up since {body['started']}, {body.get('kernels', 0)} kernel(s), "
            f"{body.get('connections', 0)} connection(s)"
        )
    if "version" not in body:
        return False, f"{url} answered without a 'version' field (is it JupyterLab?)"
    return True, f"{url}: jupyter_server {body['version']}"


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as every command of the course does
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    p = Parser(prog="healthcheck.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=None, help="default: $PORT, else 8888")
    p.add_argument("--base-url", default="/", help="JupyterLab's --ServerApp.base_url (default /)")
    p.add_argument("--timeout", type=seconds, default=5.0)
    args = p.parse_args(argv)
    port = args.port
    if port is None:
        try:
            port = port_number(os.environ.get("PORT", "8888"))
        except argparse.ArgumentTypeError as e:
            p.error(f"PORT: {e}")
    token = os.environ.get("JUPYTER_TOKEN", "")
    base = "/" + args.base_url.strip("/") + "/" if args.base_url.strip("/") else "/"
    url = f"http://{args.host}:{port}{base}api" + ("/status" if token else "")
    ok, line = check(url, token, args.timeout)
    print(("healthy: " if ok else "unhealthy: ") + line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
