# GPU image of the course: TensorFlow 2.15.1 + Horovod 0.28.1 (NCCL operations) + JupyterLab.
#
#   docker build -t gputopo-course .
#   docker run --rm --gpus all --ipc=host --ulimit memlock=-1 -p 8888:8888 gputopo-course
#
# The base image is pinned to the CUDA/cuDNN pair TensorFlow 2.15.1 was built for (CUDA 12.2,
# cuDNN 8.9); it also brings nvcc and NCCL 2.19 (headers and library) for Horovod and the
# course's CUDA programs. environment/course.def (Apptainer) starts from the same image.
# The environment is made by environment/install.sh, the same script `make lab` and
# `make test` run, so the tested path and the container path cannot drift.
FROM nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 \
    NCCL_NVLS_ENABLE=0

# Python 3.10 is Ubuntu 22.04's own (TensorFlow 2.15 supports 3.9-3.11); -dev and a compiler
# for the Horovod build; make for the course's Makefiles. Versions come with the pinned base.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3.10 python3.10-venv python3.10-dev build-essential make git ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/course

# 1. The environment first, so a change to the course content does not rebuild Horovod.
#    Compute capabilities 7.0 (V100) to 9.0 (H100/H200) for Horovod's CUDA kernels.
COPY environment/ environment/
RUN HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90 PYTHON=/usr/bin/python3.10 \
    bash environment/install.sh --gpu --venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    VENV=/opt/venv

# 2. Fashion-MNIST, baked in. Ubuntu 22.04 has no dataset-fashion-mnist package, so the build
#    fetches the official files (MD5-checked) through the course's own loader into the same
#    folder Debian's package uses, and verifies their content (SHA-256 of the arrays).
#    Offline builds: put the four .gz files in source_code/data/fashion-mnist/ of the build
#    context instead; the loader then finds and verifies them and nothing is downloaded.
COPY source_code/ source_code/
RUN if python -m gputopo.fmnist --check; then echo "dataset from the build context"; \
    else python -m gputopo.fmnist --download /usr/share/datasets/fashion-mnist \
      && FASHION_MNIST_DIR=/usr/share/datasets/fashion-mnist python -m gputopo.fmnist --check; fi

# 3. The course, owned by the unprivileged user learner (uid 1000), who can write results
#    next to the notebooks; USER is numeric so runtimes that require a non-root uid see one.
RUN useradd --create-home --uid 1000 --shell /bin/bash learner \
 && chown learner:learner /opt/course
COPY --chown=learner:learner . /opt/course
USER 1000:1000
WORKDIR /opt/course

EXPOSE 8888
# Listens on all interfaces inside the container (docker's -p decides what is reachable) and
# keeps token authentication: the token is printed in the log, or set one with -e JUPYTER_TOKEN=...
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", \
     "--ServerApp.root_dir=/opt/course", "--ServerApp.default_url=/lab/tree/Start_Here.ipynb"]
