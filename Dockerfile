# GPU image of the course: TensorFlow 2.15.1 + Horovod 0.28.1 (NCCL operations) + JupyterLab.
#
#   docker build -t gputopo-course --build-arg VERSION="$(git describe --always --dirty)" .
#   docker run --rm --gpus all --ipc=host --ulimit memlock=-1 -p 8888:8888 gputopo-course
#   docker run --rm --gpus all gputopo-course make check      # instructor preflight instead of the lab
#
# The base image is pinned to the CUDA/cuDNN pair TensorFlow 2.15.1 was built for (CUDA 12.2,
# cuDNN 8.9); it also brings nvcc and NCCL 2.19 (headers and library) for Horovod and the
# course's CUDA programs. environment/course.def (Apptainer) starts from the same image.
# It is pinned by tag; docs/maintainer.md ("Pinning the base image") says how a site pins it by digest.
# The environment is made by environment/install.sh, the same script `make lab` and
# `make test` run, so the tested path and the container path cannot drift;
# `make rehearse-gpu` rehearses its --gpu build on a machine without a GPU.
FROM nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04

# What the image is, for registries and admins (OCI annotation keys). VERSION and SOURCE are
# set by whoever builds: e.g. `git describe` and the URL of the repository the build came from.
ARG VERSION=unreleased
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="gputopo-course" \
      org.opencontainers.image.description="GPU topology and distributed deep learning course: JupyterLab, TensorFlow 2.15.1, Horovod 0.28.1 (NCCL)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0 AND CC-BY-4.0" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 \
    NCCL_NVLS_ENABLE=0

# Python 3.10 is Ubuntu 22.04's own (TensorFlow 2.15 supports 3.9-3.11); -dev and a compiler
# for the Horovod build; make for the course's Makefiles; numactl and util-linux (lscpu) for the
# commands learners type in notebooks 1 and 2. Versions come with the pinned base.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3.10 python3.10-venv python3.10-dev build-essential make git ca-certificates \
      numactl util-linux \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/course

# Layers from the least to the most often changed, so that editing the course rebuilds neither
# Horovod nor the dataset layer.
# 1. The environment. Compute capabilities 7.0 (V100) to 9.0 (H100/H200) for Horovod's kernels.
COPY environment/ environment/
RUN HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90 PYTHON=/usr/bin/python3.10 \
    bash environment/install.sh --gpu --venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    VENV=/opt/venv

# 2. Fashion-MNIST, baked in, with only the course's loader (one standard-library file) and the
#    data folder of the build context: Ubuntu 22.04 has no dataset-fashion-mnist package, so the
#    build fetches the official files (MD5-checked) into the folder Debian's package uses and
#    verifies their content (SHA-256 of the arrays). Offline builds: put the four .gz files in
#    source_code/data/fashion-mnist/ of the build context; they are verified and nothing is fetched.
COPY source_code/data/ /usr/share/datasets/
COPY source_code/gputopo/fmnist.py /usr/local/lib/gputopo-fmnist.py
RUN FASHION_MNIST_DIR=/usr/share/datasets/fashion-mnist; export FASHION_MNIST_DIR \
 && rm -f /usr/share/datasets/.gitignore \
 && if python /usr/local/lib/gputopo-fmnist.py --check; then echo "dataset from the build context"; \
    else python /usr/local/lib/gputopo-fmnist.py --download "$FASHION_MNIST_DIR" \
      && python /usr/local/lib/gputopo-fmnist.py --check; fi \
 && rm /usr/local/lib/gputopo-fmnist.py

# 3. The course (source_code included, copied this once), owned by the unprivileged user learner
#    (uid 1000), who can write results next to the notebooks; USER is numeric so runtimes that
#    require a non-root uid see one.
RUN useradd --create-home --uid 1000 --shell /bin/bash learner \
 && chown learner:learner /opt/course
COPY --chown=learner:learner . /opt/course
USER 1000:1000
WORKDIR /opt/course

EXPOSE 8888
# Healthy once JupyterLab's REST API answers: /api/status with the token from JUPYTER_TOKEN when
# the container has one, else /api (which needs none). See environment/healthcheck.py.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["python", "/opt/course/environment/healthcheck.py"]
# Listens on all interfaces inside the container (docker's -p decides what is reachable) and
# keeps token authentication: Jupyter prints a random token in the log, or takes the one given
# with -e JUPYTER_TOKEN=... (from the environment, never the command line).
# No ENTRYPOINT: any other command runs instead, e.g. `make check` or `make course`.
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", \
     "--ServerApp.root_dir=/opt/course", "--ServerApp.default_url=/lab/tree/Start_Here.ipynb"]
