# moim: docker build -t moim . && docker run -p 8080:8080 -v moim-data:/data moim
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md config.yaml ./
COPY proxy ./proxy
COPY memory ./memory
RUN pip install --no-cache-dir ".[postgres,mcp]"
# Convert the bundled embedding model to int8 once, at build time (memory/bundled_model.py).
ENV MOIM_CACHE_DIR=/opt/moim-cache
RUN python -c "from memory.bundled_model import bundled_model_dir; bundled_model_dir()"
# The journal of turns not yet stored on the volume too (with Postgres it would be in /app).
ENV MOIM_HOST=0.0.0.0 MOIM_PORT=8080 MOIM_DB=/data/moim.db MOIM_JOURNAL=/data/moim.db.journal
VOLUME /data
EXPOSE 8080
# Binding 0.0.0.0 without auth.keys prints a warning: set keys in a mounted config.yaml.
CMD ["moim", "serve"]
