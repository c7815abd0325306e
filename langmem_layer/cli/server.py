"""The ``langmem-layer`` commands of the HTTP side: API keys and ``serve``."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC

from langmem_layer.errors import ConfigurationError, InvalidInputError
from langmem_layer.jobs import JobContext

__all__ = [
    "keys_create",
    "keys_create_arguments",
    "keys_list",
    "keys_list_arguments",
    "keys_revoke",
    "keys_revoke_arguments",
    "serve_http",
    "serve_http_arguments",
]


def keys_create_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", required=True, help="the user the key acts as")
    parser.add_argument("--admin", action="store_true",
                        help="the key may also act on other users' memory")


def keys_create(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    from langmem_layer.server.keys import create_key

    token = create_key(ctx.store, args.user, admin=args.admin)
    role = "admin key" if args.admin else "key"
    print(f"{role} for {args.user!r} (shown once; send as 'Authorization: Bearer <key>'):",
          file=sys.stderr)
    print(token)
    return 0


def keys_revoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", help="the key, as printed by `keys create`")


def keys_revoke(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    from langmem_layer.server.keys import revoke_key

    if not revoke_key(ctx.store, args.token):
        raise InvalidInputError("no such key (already revoked, or not a langmem-layer key)")
    print("key revoked")
    return 0


def keys_list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", required=True)


def keys_list(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    from langmem_layer.server.keys import list_keys

    keys = list_keys(ctx.store, args.user)
    if not keys:
        print(f"langmem-layer: user {args.user!r} has no API keys "
              f"(create one with `langmem-layer keys create --user {args.user}`)",
              file=sys.stderr)
    for key in keys:
        role = "admin" if key.admin else "user"
        print(f"{key.key_id}  {role:<5}  {key.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    return 0


def serve_http_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--dev-user", default=None, metavar="USER",
                        help="single-user demo mode: requests from loopback without a key "
                        "act as USER (refused from any other address)")
    parser.add_argument("--no-agent", action="store_true",
                        help="serve the memory REST API only, without the agent routes")


def serve_http(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Run the HTTP app under uvicorn until SIGTERM / SIGINT (then drain, exit 0)."""
    try:
        from langmem_layer.server.http import serve
        from langmem_layer.server.http.app import create_app
    except ImportError as e:
        raise ConfigurationError("serve needs the server extra: "
                                 f"pip install 'langmem-layer[server]' ({e})") from None
    app = create_app(database_url=args.database_url, data_dir=args.data_dir,
                     dev_user=args.dev_user, agent=not args.no_agent)
    serve.run(app, host=args.host, port=args.port)
    return 0
