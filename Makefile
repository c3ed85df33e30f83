# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JARS := jars/lib/.fetched
LOCAL_FS := jars/build/routing-localfs.jar
JOB_JAR := jars/build/routing-job.jar
CLASS_ARCHIVE := jars/build/spark-classes.jsa
LAKE ?= lake
CONF ?= conf/broker.xml
SPARK_JARS = $(PY) -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")'

.PHONY: setup run test lint bench recorded-random clean

setup: $(STAMP) $(JARS) $(LOCAL_FS) $(JOB_JAR) $(CLASS_ARCHIVE)

# Delta's JVM connector (jars/pom.xml), handed to Spark by routing/session.py; offline afterwards.
$(JARS): jars/pom.xml
	@command -v java >/dev/null 2>&1 || { echo "need java (Java 17), e.g. apt-get install openjdk-17-jdk-headless"; exit 1; }
	@command -v mvn >/dev/null 2>&1 || { echo "need mvn (Maven) to fetch Delta's jars, e.g. apt-get install maven"; exit 1; }
	rm -rf jars/lib
	mvn -q -B -f jars/pom.xml dependency:copy-dependencies
	@ls jars/lib/delta-spark_*.jar >/dev/null
	@touch $(JARS)

# The forkless local file system (routing/io/session.py), compiled against pyspark's Hadoop.
$(LOCAL_FS): $(wildcard jars/src/routing/localfs/*.java) $(STAMP)
	@command -v javac >/dev/null 2>&1 || { echo "need javac (a Java 17 JDK), e.g. apt-get install openjdk-17-jdk-headless"; exit 1; }
	rm -rf jars/build/classes && mkdir -p jars/build/classes
	javac --release 17 -nowarn -d jars/build/classes -cp "$$($(SPARK_JARS))/*" \
		jars/src/routing/localfs/*.java
	jar cf $@ -C jars/build/classes .

# The job's own classes (routing/io/storage.py, routing/io/lake_events.py): Delta's append
# without its check of the table's transactions, the input stream's source in the JVM, the
# check of a message's property types.
$(JOB_JAR): $(wildcard jars/src/routing/delta/*.java jars/src/routing/stream/*.java jars/src/routing/properties/*.java) $(STAMP) $(JARS)
	@command -v javac >/dev/null 2>&1 || { echo "need javac (a Java 17 JDK), e.g. apt-get install openjdk-17-jdk-headless"; exit 1; }
	rm -rf jars/build/job-classes && mkdir -p jars/build/job-classes
	javac --release 17 -nowarn -d jars/build/job-classes -cp "$$($(SPARK_JARS))/*:jars/lib/*" \
		jars/src/routing/delta/*.java jars/src/routing/stream/*.java jars/src/routing/properties/*.java
	jar cf $@ -C jars/build/job-classes .

# The classes a job loads, recorded once from a small demo (jobs/class_archive.py).
$(CLASS_ARCHIVE): $(JARS) $(LOCAL_FS) $(JOB_JAR) $(STAMP)
	$(PY) -m jobs.class_archive --to $@

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: setup
	$(PY) -m jobs.demo --lake $(LAKE) --conf $(CONF) --fresh

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) -m bench

# Random scenarios recorded by a real Artemis broker, played on the job (tests/recorded_random.py).
SEEDS ?= 1 21
CASES ?= 4
recorded-random: setup
	$(PY) -m tests.recorded_random $(SEEDS) $(CASES)

clean:
	rm -rf $(LAKE) .pytest_cache spark-warehouse metastore_db jars/lib jars/build
