"""A real HTTP server on 127.0.0.1 serving a few files from memory: where model downloads are tested
(a good file, a corrupted one, one cut off halfway), over real sockets, with no internet."""
from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def serving(files: Mapping[str, bytes], cut: frozenset[str] = frozenset()) -> Iterator[str]:
    """The server's base URL while the block runs: each path in ``files`` answers its bytes, one in
    ``cut`` promises them all and hangs up halfway, any other is a 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if self.path in cut else body)
            self.close_connection = self.path in cut

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
