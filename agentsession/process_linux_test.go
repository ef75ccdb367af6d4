package agentsession_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat/chattest"
)

// envAgentParent makes the test binary the daemon of
// TestAgentDiesWithTheDaemon: it starts an agent and waits to be killed.
const envAgentParent = "AGENTSESSION_TEST_AGENT_PARENT"

// TestAgentDiesWithTheDaemon kills a daemon with SIGKILL (no cancellation
// reaches its agents) and checks that the agent it started dies too.
func TestAgentDiesWithTheDaemon(t *testing.T) {
	if os.Getenv(envAgentParent) != "" {
		cmd := agentsession.Command(context.Background(), "sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		select {}
	}
	t.Parallel()
	parent := exec.Command(os.Args[0], "-test.run=^TestAgentDiesWithTheDaemon$")
	parent.Env = append(os.Environ(), envAgentParent+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the agent's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the daemon said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("agent %d is not running before the daemon dies", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	chattest.Eventually(t, fmt.Sprintf("agent %d to die with its daemon", pid), func() bool { return !alive(pid) })
}
