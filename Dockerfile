# bundle-mcp as a service: streamable HTTP on port 8765, the bundle mounted read-only at /bundle.
#
#   docker build -t bundle-mcp .
#   docker run --rm -p 8765:8765 -e BUNDLE_MCP_TOKEN \
#       -v "$PWD/docs/knowledge:/bundle:ro" -v bundle-mcp-cache:/var/cache/bundle-mcp bundle-mcp
#
# The token comes from $BUNDLE_MCP_TOKEN (`serve --http` reads it when --token is absent). The
# parse cache lives in the volume at $BUNDLE_MCP_CACHE_DIR, so a restarted container does not
# parse every file again; without a writable volume it is skipped (one warning), and
# BUNDLE_MCP_CACHE_DIR=off turns it off. GET /healthz answers while the process serves, GET
# /readyz once the bundle is loaded and indexed; neither needs the token.
#
# tests/test_dockerfile.py runs the RUN lines below in a fresh virtualenv, without Docker: keep
# them to pip, shell built-ins and paths relative to WORKDIR or taken from ENV.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    BUNDLE_MCP_CACHE_DIR=/var/cache/bundle-mcp

WORKDIR /opt/bundle-mcp
COPY . src/
# Install (not editable), drop the sources, and make the cache folder the user's own: a named
# volume mounted there starts with this folder's owner.
RUN pip install ./src \
    && rm -rf src \
    && mkdir -p "$BUNDLE_MCP_CACHE_DIR" \
    && chown 10001:10001 "$BUNDLE_MCP_CACHE_DIR"

# A numeric user without a shell or home: Kubernetes' runAsNonRoot can check a number.
USER 10001:10001
VOLUME ["/var/cache/bundle-mcp"]
EXPOSE 8765

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]

ENTRYPOINT ["bundle-mcp"]
CMD ["serve", "/bundle", "--http", "0.0.0.0:8765"]
