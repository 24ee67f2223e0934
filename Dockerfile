# moim: docker build -t moim . && docker run -p 8080:8080 -v moim-data:/data moim
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md config.yaml ./
COPY proxy ./proxy
COPY memory ./memory
RUN pip install --no-cache-dir .
ENV MOIM_HOST=0.0.0.0 MOIM_PORT=8080 MOIM_DB=/data/moim.db
VOLUME /data
EXPOSE 8080
# Binding 0.0.0.0 without auth.keys prints a warning: set keys in a mounted config.yaml.
CMD ["moim", "serve"]
