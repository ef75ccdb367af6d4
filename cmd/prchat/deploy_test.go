package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The deploy files are read where they are: the tests run in cmd/prchat.
const deployDir = "../../deploy"

// composeFile is what the tests read of deploy/compose.yaml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image           string      `yaml:"image"`
	Build           any         `yaml:"build"`
	PullPolicy      string      `yaml:"pull_policy"`
	Command         []string    `yaml:"command"`
	EnvFile         stringOrAll `yaml:"env_file"`
	Environment     envMap      `yaml:"environment"`
	Volumes         []string    `yaml:"volumes"`
	Restart         string      `yaml:"restart"`
	StopGracePeriod string      `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Deploy struct {
		Replicas  int `yaml:"replicas"`
		Resources struct {
			Limits struct {
				Memory string `yaml:"memory"`
			} `yaml:"limits"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

// stringOrAll is a compose field that is a string or a list of them.
type stringOrAll []string

func (s *stringOrAll) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = []string{n.Value}
		return nil
	}
	var l []string
	err := n.Decode(&l)
	*s = l
	return err
}

// envMap is compose's environment: a map, or a list of KEY=VALUE.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*e = envMap{}
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			(*e)[k] = v
		}
		return nil
	}
	var m map[string]string
	err := n.Decode(&m)
	*e = m
	return err
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// prchatService reports whether a compose service runs the prchat image.
func (c composeFile) prchatService(s composeService) bool {
	return s.Build != nil || s.Image == c.builtImage()
}

// builtImage is the image name of the service that builds it.
func (c composeFile) builtImage() string {
	for _, s := range c.Services {
		if s.Build != nil {
			return s.Image
		}
	}
	return ""
}

// readEnvFile reads a KEY=VALUE file (compose's env_file, systemd's
// EnvironmentFile), skipping comments and blank lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is no KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// imageEnv returns the ENV of the Dockerfile's final stage.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "FROM ") {
			clear(env)
		}
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	return env
}

// containerEnv is the environment compose gives a service's container:
// the image's ENV, then its env_file, then its environment.
func containerEnv(t *testing.T, s composeService) map[string]string {
	t.Helper()
	env := imageEnv(t)
	for _, f := range s.EnvFile {
		for k, v := range readEnvFile(t, filepath.Join(deployDir, f)) {
			env[k] = v
		}
	}
	for k, v := range s.Environment {
		env[k] = v
	}
	return env
}

// grace is a process's PRCHAT_SHUTDOWN_GRACE (default 10s).
func grace(t *testing.T, env map[string]string) time.Duration {
	t.Helper()
	v := env["PRCHAT_SHUTDOWN_GRACE"]
	if v == "" {
		v = "10s"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("PRCHAT_SHUTDOWN_GRACE %q: %v", v, err)
	}
	return d
}

// TestDockerfilePinsGoModsGo: the build stage's Go is go.mod's, to the
// patch.
func TestDockerfilePinsGoModsGo(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+\.\d+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no go version with its patch")
	}
	docker, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	from := regexp.MustCompile(`(?m)^FROM golang:(\S+)`).FindSubmatch(docker)
	if from == nil {
		t.Fatal("the Dockerfile has no golang build stage")
	}
	if tag := string(from[1]); tag != string(m[1]) && !strings.HasPrefix(tag, string(m[1])+"-") {
		t.Errorf("the Dockerfile builds with golang:%s, go.mod says go %s", tag, m[1])
	}
}

// TestComposeFile checks the compose file's properties that no container
// engine checks here: the image built once, restart policies and health
// checks, one secret key for every prchat process, worker ids and data
// directories that stay apart when the worker service is scaled, and a
// stop grace longer than the worker's.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	var builds []string
	for name, s := range c.Services {
		if s.Build != nil {
			builds = append(builds, name)
		}
	}
	if len(builds) != 1 || c.builtImage() == "" {
		t.Fatalf("services that build the image: %v (with image name %q); want one, naming its image", builds, c.builtImage())
	}
	var prchat []string
	for name, s := range c.Services {
		if c.prchatService(s) {
			prchat = append(prchat, name)
		}
	}
	slices.Sort(prchat)
	if want := []string{"api", "migrate", "worker"}; !slices.Equal(prchat, want) {
		t.Fatalf("services running the prchat image: %v, want %v", prchat, want)
	}

	for name, s := range c.Services {
		// A one-shot service: every dependent waits for its success.
		oneShot := false
		for _, other := range c.Services {
			if d, ok := other.DependsOn[name]; ok && d.Condition == "service_completed_successfully" {
				oneShot = true
			}
		}
		switch {
		case oneShot && s.Restart != "on-failure":
			t.Errorf("%s: restart %q; a one-shot service restarts on-failure", name, s.Restart)
		case !oneShot && s.Restart != "unless-stopped" && s.Restart != "always":
			t.Errorf("%s: restart %q; want unless-stopped or always", name, s.Restart)
		}
		if !oneShot && (s.Healthcheck == nil || s.Healthcheck.Disable || len(s.Healthcheck.Test) < 2) {
			t.Errorf("%s: no health check", name)
		}
		if c.prchatService(s) && s.Build == nil && s.PullPolicy != "never" {
			t.Errorf("%s runs the image %s built by another service, but its pull_policy %q lets compose try to pull it", name, s.Image, s.PullPolicy)
		}
		for dep, d := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("%s depends on a service %s that does not exist", name, dep)
			}
			if dep != "migrate" && d.Condition != "service_healthy" {
				t.Errorf("%s waits for %s to be %q, not healthy", name, dep, d.Condition)
			}
		}
	}

	// One secret key for every prchat process: the same PRCHAT_SECRET_KEY,
	// or the same key file on a volume they all mount.
	var keys []string
	for _, name := range prchat {
		s := c.Services[name]
		env := containerEnv(t, s)
		switch {
		case env["PRCHAT_SECRET_KEY"] != "":
			keys = append(keys, "key "+env["PRCHAT_SECRET_KEY"])
		case env["PRCHAT_SECRET_KEY_FILE"] != "":
			vol, ok := namedVolumeOf(c, s, env["PRCHAT_SECRET_KEY_FILE"])
			if !ok {
				t.Errorf("%s: its PRCHAT_SECRET_KEY_FILE %s is on no named volume: each container would make its own key", name, env["PRCHAT_SECRET_KEY_FILE"])
			}
			keys = append(keys, "file "+vol+":"+env["PRCHAT_SECRET_KEY_FILE"])
		default:
			t.Errorf("%s: neither PRCHAT_SECRET_KEY nor PRCHAT_SECRET_KEY_FILE: it would make a key of its own", name)
		}
	}
	slices.Sort(keys)
	if len(slices.Compact(keys)) != 1 {
		t.Errorf("the prchat services do not share one secret key: %v", keys)
	}

	// Workers of a scaled service: ids from their containers' host names,
	// and data directories of their own.
	w := c.Services["worker"]
	env := containerEnv(t, w)
	if id, ok := env["PRCHAT_WORKER_ID"]; ok {
		t.Errorf("worker: PRCHAT_WORKER_ID=%q is the same for every replica; leave it to the container's host name", id)
	}
	if vol, ok := namedVolumeOf(c, w, env["PRCHAT_DATA_DIR"]+"/x"); ok {
		t.Errorf("worker: its data directory %s is on the named volume %s, which every replica would share", env["PRCHAT_DATA_DIR"], vol)
	}
	if w.Deploy.Replicas < 2 {
		t.Errorf("worker: %d replicas; the compose file runs two", w.Deploy.Replicas)
	}
	// Replicas on one host: each sizes its turns by a memory limit of its
	// own, not by the host's memory (which every replica would take).
	checkWorkerMemory(t, "compose worker", w.Deploy.Resources.Limits.Memory)
	stop, err := time.ParseDuration(w.StopGracePeriod)
	if err != nil || stop <= grace(t, env) {
		t.Errorf("worker: stop_grace_period %q is not above its PRCHAT_SHUTDOWN_GRACE %s", w.StopGracePeriod, grace(t, env))
	}
	// The health checks ask the port the process listens on.
	for _, name := range []string{"api", "worker"} {
		s := c.Services[name]
		_, port, _ := strings.Cut(containerEnv(t, s)["PRCHAT_LISTEN"], ":")
		if test := strings.Join(s.Healthcheck.Test, " "); !strings.Contains(test, "127.0.0.1:"+port+"/") {
			t.Errorf("%s: health check %q does not ask its PRCHAT_LISTEN port %s", name, test, port)
		}
	}
}

// namedVolumeOf returns the named volume of s that holds path.
func namedVolumeOf(c composeFile, s composeService, path string) (string, bool) {
	for _, v := range s.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if _, named := c.Volumes[src]; named && strings.HasPrefix(path, strings.TrimSuffix(dst, "/")+"/") {
			return src, true
		}
	}
	return "", false
}

// k8sObject is a decoded Kubernetes object.
type k8sObject map[string]any

// get walks a path of keys (and, for lists, indexes) in o.
func (o k8sObject) get(path ...any) any {
	var cur any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := cur.(map[string]any)
			cur = m[k]
		case int:
			l, _ := cur.([]any)
			if k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

func (o k8sObject) str(path ...any) string { s, _ := o.get(path...).(string); return s }

func readManifests(t *testing.T, files ...string) []k8sObject {
	t.Helper()
	var out []k8sObject
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(deployDir, "kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			// Into a plain map: yaml.v3 would decode nested maps into
			// k8sObject too.
			var o map[string]any
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o != nil {
				out = append(out, k8sObject(o))
			}
		}
	}
	return out
}

// TestKubernetesManifests checks the manifests: every prchat container
// reads the one Secret with PRCHAT_SECRET_KEY; workers declare their
// metrics port and have probes on it; each workload has a
// PodDisruptionBudget; pods get longer to stop than the worker's grace.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := readManifests(t, "prchat.yaml", "first-token.yaml")
	secrets := map[string]k8sObject{}
	var pdbs []k8sObject
	workloads := map[string]k8sObject{}
	for _, o := range objs {
		switch o.str("kind") {
		case "Secret":
			secrets[o.str("metadata", "name")] = o
		case "PodDisruptionBudget":
			pdbs = append(pdbs, o)
		case "Deployment", "StatefulSet", "Job":
			workloads[o.str("kind")+"/"+o.str("metadata", "name")] = o
		}
	}
	if len(workloads) != 3 {
		t.Fatalf("workloads: %v; want the API Deployment, the worker StatefulSet and the first-token Job", len(workloads))
	}
	for name, w := range workloads {
		spec := k8sObject(w.get("spec", "template", "spec").(map[string]any))
		var containers []any
		if l, ok := spec.get("initContainers").([]any); ok {
			containers = append(containers, l...)
		}
		containers = append(containers, spec.get("containers").([]any)...)
		for i := range containers {
			c := k8sObject(containers[i].(map[string]any))
			if !strings.HasPrefix(c.str("image"), "prchat") {
				continue
			}
			if !readsSecretKey(c, secrets) {
				t.Errorf("%s container %s: no PRCHAT_SECRET_KEY from a Secret; every pod would make its own key", name, c.str("name"))
			}
		}
		kind := w.str("kind")
		if kind == "Job" {
			continue
		}
		labels, _ := w.get("spec", "template", "metadata", "labels").(map[string]any)
		covered := false
		for _, p := range pdbs {
			sel, _ := p.get("spec", "selector", "matchLabels").(map[string]any)
			if len(sel) > 0 && matches(sel, labels) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
		c := k8sObject(spec.get("containers", 0).(map[string]any))
		env := imageEnv(t)
		if l, ok := c.get("env").([]any); ok {
			for _, e := range l {
				e := k8sObject(e.(map[string]any))
				env[e.str("name")] = e.str("value")
			}
		}
		gp, _ := spec.get("terminationGracePeriodSeconds").(int)
		if time.Duration(gp)*time.Second <= grace(t, env) {
			t.Errorf("%s: terminationGracePeriodSeconds %d is not above PRCHAT_SHUTDOWN_GRACE %s", name, gp, grace(t, env))
		}
		if kind != "StatefulSet" {
			continue
		}
		// A worker's turns are sized by its memory limit, and it asks the
		// scheduler for that memory.
		limit, request := c.str("resources", "limits", "memory"), c.str("resources", "requests", "memory")
		checkWorkerMemory(t, name, limit)
		if request != limit {
			t.Errorf("%s: requests %q of memory where its limit is %q; the scheduler would place more workers on a node than their turns fit", name, request, limit)
		}
		// A worker: /metrics and /healthz on PRCHAT_LISTEN, declared and probed.
		_, listen, _ := strings.Cut(env["PRCHAT_LISTEN"], ":")
		port, _ := strconv.Atoi(listen)
		ports := map[string]int{}
		if l, ok := c.get("ports").([]any); ok {
			for _, p := range l {
				p := k8sObject(p.(map[string]any))
				n, _ := p.get("containerPort").(int)
				ports[p.str("name")] = n
			}
		}
		if port == 0 || !slices.Contains(mapValues(ports), port) {
			t.Errorf("%s: no containerPort for its PRCHAT_LISTEN %q (metrics): %v", name, env["PRCHAT_LISTEN"], ports)
		}
		for _, probe := range []string{"readinessProbe", "livenessProbe"} {
			path := c.str(probe, "httpGet", "path")
			p := c.get(probe, "httpGet", "port")
			n, isNum := p.(int)
			if s, ok := p.(string); ok {
				n, isNum = ports[s], true
			}
			if path != "/healthz" || !isNum || n != port {
				t.Errorf("%s: %s asks %v%s, want /healthz on the metrics port %d", name, probe, p, path, port)
			}
		}
	}
}

// checkWorkerMemory checks a worker's memory limit (compose's 4g or
// Kubernetes' 4Gi): PRCHAT_CONCURRENCY's default is taken from it, so
// there must be one, with room for the 1 GiB the worker keeps for itself
// and a turn's 256 MiB.
func checkWorkerMemory(t *testing.T, name, limit string) {
	t.Helper()
	if limit == "" {
		t.Errorf("%s: no memory limit; PRCHAT_CONCURRENCY's default would take the host's whole memory for this one worker", name)
		return
	}
	n, err := memoryBytes(limit)
	if err != nil {
		t.Errorf("%s: memory limit %q: %v", name, limit, err)
		return
	}
	if n < 1<<30+256<<20 {
		t.Errorf("%s: memory limit %q leaves no room for a turn after the worker's 1 GiB", name, limit)
	}
}

// memoryBytes reads a memory size as compose (4g, 512m, in powers of 1024)
// or Kubernetes (4Gi, 512Mi) writes it.
func memoryBytes(s string) (uint64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"k", 10}, {"m", 20}, {"g", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"b", 0}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseUint(num, 10, 64)
			return n << u.shift, err
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

func mapValues(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func matches(selector, labels map[string]any) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// readsSecretKey reports whether container c gets PRCHAT_SECRET_KEY from
// one of secrets.
func readsSecretKey(c k8sObject, secrets map[string]k8sObject) bool {
	if l, ok := c.get("envFrom").([]any); ok {
		for _, e := range l {
			name := k8sObject(e.(map[string]any)).str("secretRef", "name")
			if s, ok := secrets[name]; ok && s.str("stringData", "PRCHAT_SECRET_KEY") != "" {
				return true
			}
		}
	}
	if l, ok := c.get("env").([]any); ok {
		for _, e := range l {
			e := k8sObject(e.(map[string]any))
			if e.str("name") == "PRCHAT_SECRET_KEY" && e.str("valueFrom", "secretKeyRef", "name") != "" {
				return true
			}
		}
	}
	return false
}

// TestReadmeDeploySteps: the README builds the image before the manifests
// use it, and applies the main manifest (its Secret) before the
// first-token Job that reads it.
func TestReadmeDeploySteps(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	build := strings.Index(readme, "docker build -f deploy/Dockerfile")
	main := strings.Index(readme, "kubectl apply -f deploy/kubernetes/prchat.yaml")
	job := strings.Index(readme, "kubectl apply -f deploy/kubernetes/first-token.yaml")
	switch {
	case build < 0:
		t.Error("the README never says how the image is built (docker build -f deploy/Dockerfile)")
	case main < 0 || job < 0:
		t.Errorf("the README does not apply both manifests (prchat.yaml at %d, first-token.yaml at %d)", main, job)
	case !(build < main && main < job):
		t.Errorf("the README's steps are out of order: build at %d, main manifest at %d, first-token Job at %d", build, main, job)
	}
}

// systemdUnit is a unit file's [Service] settings, each with its values.
type systemdUnit map[string][]string

func readUnit(t *testing.T, path string) systemdUnit {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := systemdUnit{}
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			u[k] = append(u[k], v)
		}
	}
	return u
}

// flagValue returns the value of --name in a command line ("" if absent).
func flagValue(cmdline, name string) string {
	f := strings.Fields(cmdline)
	for i, a := range f {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// TestSystemdUnits checks what systemd-analyze cannot: under
// ProtectSystem=strict each daemon's data directory (and HOME, where the
// agent CLIs write) is writable, the worker's probes do not take the API's
// port, and a stop waits longer than the worker's grace.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	listens := map[string]string{}
	for _, name := range []string{"prchat-api", "prchat-worker"} {
		u := readUnit(t, filepath.Join(deployDir, "systemd", name+".service"))
		env := map[string]string{}
		for _, f := range u["EnvironmentFile"] {
			if f != "/etc/prchat/prchat.env" {
				t.Fatalf("%s reads %s; the test knows /etc/prchat/prchat.env (deploy/prchat.env)", name, f)
			}
			env = readEnvFile(t, filepath.Join(deployDir, "prchat.env"))
		}
		// EnvironmentFile= wins over Environment=; flags win over both.
		for _, kv := range u["Environment"] {
			for _, kv := range strings.Fields(kv) {
				k, v, _ := strings.Cut(kv, "=")
				if _, set := env[k]; !set {
					env[k] = v
				}
			}
		}
		start := strings.Join(u["ExecStart"], " ")
		dataDir := cmpOr(flagValue(start, "data-dir"), env["PRCHAT_DATA_DIR"])
		listens[name] = cmpOr(flagValue(start, "listen"), env["PRCHAT_LISTEN"], "127.0.0.1:8080")
		var writable []string
		for _, d := range u["StateDirectory"] {
			for _, d := range strings.Fields(d) {
				writable = append(writable, "/var/lib/"+d)
			}
		}
		for _, d := range u["ReadWritePaths"] {
			writable = append(writable, strings.Fields(d)...)
		}
		if slices.Contains(u["ProtectSystem"], "strict") {
			for what, dir := range map[string]string{"PRCHAT_DATA_DIR": dataDir, "HOME": env["HOME"]} {
				if dir == "" && what == "HOME" {
					continue
				}
				if !slices.ContainsFunc(writable, func(w string) bool { return dir == w || strings.HasPrefix(dir, w+"/") }) {
					t.Errorf("%s: ProtectSystem=strict and its %s %q is in no StateDirectory= or ReadWritePaths= (%v): it cannot start", name, what, dir, writable)
				}
			}
		}
		stop, err := time.ParseDuration(cmpOr(strings.Join(u["TimeoutStopSec"], ""), "90") + "s")
		if err != nil || stop <= grace(t, env) {
			t.Errorf("%s: TimeoutStopSec %v is not above PRCHAT_SHUTDOWN_GRACE %s", name, u["TimeoutStopSec"], grace(t, env))
		}
		if len(u["Restart"]) == 0 {
			t.Errorf("%s: no Restart=", name)
		}
	}
	_, apiPort, _ := strings.Cut(listens["prchat-api"], ":")
	_, workerPort, _ := strings.Cut(listens["prchat-worker"], ":")
	if apiPort == workerPort {
		t.Errorf("the API and the worker of one host both listen on port %s (%v)", apiPort, listens)
	}
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the units,
// their prchat binary mapped to an executable of this machine. Any
// warning fails it: systemd-analyze exits 0 on unknown keys and values
// it cannot parse. It skips without systemd-analyze, except in CI
// (.ci/run installs Debian's systemd package).
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but systemd-analyze is not installed (Debian's systemd package)")
		}
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); CI runs this test")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	units, err := filepath.Glob(filepath.Join(deployDir, "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	var args []string
	for _, u := range units {
		raw, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte("/usr/local/bin/prchat ")) {
			t.Fatalf("%s does not run /usr/local/bin/prchat", u)
		}
		raw = bytes.ReplaceAll(raw, []byte("/usr/local/bin/prchat "), []byte(exe+" "))
		dst := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	cmd := exec.Command(bin, append([]string{"verify", "--man=no"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// It does find mistakes: a unit with an unknown key is reported.
	bad := filepath.Join(dir, "prchat-bad.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart="+exe+" api\nProtectSytem=strict\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(bin, "verify", "--man=no", bad).CombinedOutput()
	if !strings.Contains(string(out), "ProtectSytem") {
		t.Fatalf("systemd-analyze verify did not report a misspelt key: %s", out)
	}
}
