package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The warm restart on a whole machine (issue 30): Debian 12 in a virtual machine (deploy/vm/image.sh)
// runs the daemon from deploy/leasecached.service under systemd, with deploy/vm/vm.conf's --data-dir.
// What a process on this machine cannot show is shown there: systemd restarting the unit after SIGKILL and
// after the kernel's OOM killer in the unit's own cgroup v2 (MemoryMax), a clean reboot (systemd stops
// the unit, the machine boots, the enabled unit starts), and a hard reset (the guest's page cache and
// the live copy on its tmpfs are lost; its disk keeps what the guest wrote to it). `make vm-check`
// builds the machine and runs these; `make test` does not (the build downloads Debian).

// vmDirEnv names the directory deploy/vm/image.sh built the machine in.
const vmDirEnv = "LEASECACHED_VM_DIR"

// vmAccelEnv set to kvm runs the machine under KVM instead of emulating it.
const vmAccelEnv = "LEASECACHED_VM_ACCEL"

const (
	vmBootTimeout = 3 * time.Minute  // from a reset or reboot to the daemon serving
	vmCmdTimeout  = 60 * time.Second // one command on the control line
	vmOOMTimeout  = 30 * time.Second // pushing lines until the OOM killer ends the daemon
	vmOOMRoom     = 16 << 20         // the cgroup's MemoryMax above what it holds when the push begins
	vmOOMMaxPush  = 60               // lines of oomPushLine bytes: past vmOOMRoom, under the gathering budget
	vmUnit        = "leasecached"
)

// vmMachine is one running virtual machine: QEMU, the daemon's port forwarded to the host, the
// control line (a root shell on the guest's second serial port) and QEMU's monitor (QMP).
type vmMachine struct {
	t    *testing.T
	dir  string // scratch: the disk's overlay, the sockets, the console log
	cmd  *exec.Cmd
	addr string // the host's end of the forwarded daemon port

	exited chan struct{} // closed once QEMU has exited

	ctl  net.Conn
	mu   sync.Mutex // guards out
	out  bytes.Buffer
	more chan struct{} // signalled when out grows
	seq  int           // the control line's last command number
}

// startVM boots the machine of vmDir, with memMB of memory, on a copy-on-write overlay of its disk.
func startVM(t *testing.T, vmDir string, memMB int) *vmMachine {
	t.Helper()
	dir, err := os.MkdirTemp("", "lcvm") // short: a unix socket's path must fit 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	overlay := filepath.Join(dir, "disk.qcow2")
	mustRun(t, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", filepath.Join(vmDir, "disk.img"), overlay)
	port, err := freePort()
	require.NoError(t, err)
	m := &vmMachine{t: t, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port), more: make(chan struct{}, 1)}
	// Emulated by default: slower, the same checks. On these machines /dev/kvm opens but a guest under it
	// hangs early in boot (nested), so KVM is only used when asked for.
	accel := []string{"-accel", "tcg", "-cpu", "max"}
	if os.Getenv(vmAccelEnv) == "kvm" {
		accel = []string{"-accel", "kvm", "-cpu", "host"}
	}
	m.cmd = exec.Command("qemu-system-x86_64", append(accel, "-smp", "2", "-m", strconv.Itoa(memMB),
		"-kernel", filepath.Join(vmDir, "vmlinuz"), "-initrd", filepath.Join(vmDir, "initrd.img"),
		"-append", "root=/dev/vda rw console=ttyS0 quiet",
		"-drive", "file="+overlay+",if=virtio,format=qcow2,cache=writeback",
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:11211", port),
		"-device", "virtio-net-pci,netdev=n0",
		"-display", "none", "-monitor", "none",
		"-serial", "file:"+filepath.Join(dir, "console.log"),
		"-chardev", "socket,id=ctl,path="+filepath.Join(dir, "ctl.sock")+",server=on,wait=off",
		"-serial", "chardev:ctl",
		"-qmp", "unix:"+filepath.Join(dir, "qmp.sock")+",server=on,wait=off")...)
	var qemuOut bytes.Buffer
	m.cmd.Stdout, m.cmd.Stderr = &qemuOut, &qemuOut
	require.NoError(t, m.cmd.Start())
	m.exited = make(chan struct{})
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.exited
		if t.Failed() {
			t.Logf("qemu: %s", qemuOut.String())
			if b, err := os.ReadFile(filepath.Join(dir, "console.log")); err == nil {
				t.Logf("the guest's console, last 6000 bytes:\n%s", b[max(0, len(b)-6000):])
			}
			m.mu.Lock()
			b := m.out.Bytes()
			t.Logf("the control line, last 3000 bytes:\n%s", b[max(0, len(b)-3000):])
			m.mu.Unlock()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.ctl, err = net.Dial("unix", filepath.Join(dir, "ctl.sock"))
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "qemu's control socket: %v; qemu: %s", err, qemuOut.String())
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { m.ctl.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.ctl.Read(buf)
			m.mu.Lock()
			m.out.Write(buf[:n])
			m.mu.Unlock()
			select {
			case m.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	m.login()
	return m
}

// waitOut waits until the control line's output from byte from on matches re, and returns the match and
// the output before it; ok is false after timeout.
func (m *vmMachine) waitOut(from int, re *regexp.Regexp, timeout time.Duration) (match []string, before string, ok bool) {
	deadline := time.Now().Add(timeout)
	for {
		m.mu.Lock()
		b := m.out.Bytes()[from:]
		loc := re.FindSubmatchIndex(b)
		if loc != nil {
			for i := 0; i < len(loc); i += 2 {
				match = append(match, string(b[loc[i]:loc[i+1]]))
			}
			before = string(b[:loc[0]])
		}
		m.mu.Unlock()
		if loc != nil {
			return match, before, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, "", false
		}
		select {
		case <-m.more:
		case <-time.After(min(left, 200*time.Millisecond)):
		}
	}
}

func (m *vmMachine) outLen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.Len()
}

// login waits for the guest's root shell on the control line and makes it a plain one: dash (no line
// editing, whose echo stty cannot turn off), no echo, no prompt, no pager. It is repeated until answered,
// since what is sent before the shell starts is lost.
func (m *vmMachine) login() {
	m.t.Helper()
	deadline := time.Now().Add(vmBootTimeout)
	for try := 0; ; try++ {
		from := m.outLen()
		fmt.Fprintf(m.ctl, "\nexec /bin/sh\nstty -echo; PS1=''; PS2=''; export SYSTEMD_PAGER= SYSTEMD_COLORS=0 "+
			"TERM=dumb; printf '@@READY %%d@@\\n' %d\n", try)
		if _, _, ok := m.waitOut(from, regexp.MustCompile(fmt.Sprintf(`@@READY %d@@`, try)), 3*time.Second); ok {
			return
		}
		require.True(m.t, time.Now().Before(deadline), "no shell on the control line after %v", vmBootTimeout)
		select {
		case <-m.exited:
			require.FailNow(m.t, "qemu exited")
		default:
		}
	}
}

// run runs a shell command in the guest and returns its output and exit status.
func (m *vmMachine) run(cmd string) (string, int) {
	m.t.Helper()
	return m.runWithin(cmd, vmCmdTimeout)
}

// runWithin is run for a command that may take up to timeout.
func (m *vmMachine) runWithin(cmd string, timeout time.Duration) (string, int) {
	m.t.Helper()
	m.seq++
	from := m.outLen()
	_, err := fmt.Fprintf(m.ctl, "%s; printf '\\n@@END %%d %%d@@\\n' %d $?\n", cmd, m.seq)
	require.NoError(m.t, err)
	re := regexp.MustCompile(fmt.Sprintf(`\r?\n@@END %d (\d+)@@\r?\n`, m.seq))
	match, out, ok := m.waitOut(from, re, timeout)
	require.True(m.t, ok, "%q: no end after %v", cmd, timeout)
	status, _ := strconv.Atoi(match[1])
	return strings.ReplaceAll(out, "\r\n", "\n"), status
}

// must runs cmd and requires exit status 0; it returns the output without its surrounding space.
func (m *vmMachine) must(cmd string) string {
	m.t.Helper()
	out, status := m.run(cmd)
	require.Zero(m.t, status, "%q exited %d: %s", cmd, status, out)
	return strings.TrimSpace(out)
}

// qmp sends one QMP command to QEMU and requires its success.
func (m *vmMachine) qmp(command string) {
	m.t.Helper()
	c, err := net.Dial("unix", filepath.Join(m.dir, "qmp.sock"))
	require.NoError(m.t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	reply := func() map[string]any {
		for {
			l, err := r.ReadBytes('\n')
			require.NoError(m.t, err, "qmp")
			var v map[string]any
			require.NoError(m.t, json.Unmarshal(l, &v), "qmp: %s", l)
			if _, ev := v["event"]; !ev {
				return v
			}
		}
	}
	reply() // the greeting
	for _, cmd := range []string{"qmp_capabilities", command} {
		fmt.Fprintf(c, `{"execute": %q}`+"\n", cmd)
		v := reply()
		require.Contains(m.t, v, "return", "qmp %s: %v", cmd, v)
	}
}

// bootID is the guest's boot id: a new one after each boot.
func (m *vmMachine) bootID() string { return m.must("cat /proc/sys/kernel/random/boot_id") }

// daemon is the guest's daemon as the harness dials it.
func (m *vmMachine) daemon() *daemon { return &daemon{name: "leasecached in the VM", addr: m.addr} }

// waitServing waits until the daemon answers through the forwarded port with a pid other than notPid
// and has loaded its directory; it returns its stats.
func (m *vmMachine) waitServing(notPid string) map[string]string {
	m.t.Helper()
	deadline := time.Now().Add(vmBootTimeout)
	for {
		if c, err := dialRS(m.daemon()); err == nil {
			st, err := c.stats()
			c.Close()
			if err == nil && st["pid"] != notPid {
				return waitLoaded(m.t, m.daemon())
			}
		}
		require.True(m.t, time.Now().Before(deadline), "the daemon did not serve (pid other than %s) within %v: %s",
			notPid, vmBootTimeout, m.status())
		time.Sleep(100 * time.Millisecond)
	}
}

// status is the unit's state and last log lines, for failure messages.
func (m *vmMachine) status() string {
	out, _ := m.run("systemctl status --no-pager -n 20 " + vmUnit)
	return out
}

// restarts is how many times systemd has restarted the unit since it was last started by hand.
func (m *vmMachine) restarts() int {
	n, err := strconv.Atoi(m.must("systemctl show -p NRestarts --value " + vmUnit))
	require.NoError(m.t, err)
	return n
}

// reboot restarts the machine (hard: QEMU's reset, which loses the guest's memory; clean: systemctl reboot)
// and waits until it has booted again and the daemon serves.
func (m *vmMachine) reboot(hard bool) map[string]string {
	m.t.Helper()
	boot := m.bootID()
	if hard {
		m.qmp("system_reset")
	} else {
		fmt.Fprintf(m.ctl, "systemctl reboot\n")
	}
	m.login()
	deadline := time.Now().Add(vmBootTimeout)
	for m.bootID() == boot {
		require.True(m.t, time.Now().Before(deadline), "no new boot after %v", vmBootTimeout)
		time.Sleep(time.Second)
		m.login()
	}
	return m.waitServing("")
}

// ready makes t the test m fails, and waits until the daemon serves: a subtest starts from a daemon that
// serves whatever the one before it left.
func (m *vmMachine) ready(t *testing.T) {
	m.t = t
	m.waitServing("")
}

// fill empties the daemon's cache and stores fillBeforeSync's items; it returns the connection and the
// model.
func (m *vmMachine) fill(t *testing.T) (*rsConn, *rebootModel) {
	t.Helper()
	c := mustDialRS(t, m.daemon())
	_, err := c.call("flush_all\r\n")
	require.NoError(t, err)
	return c, fillBeforeSync(t, c)
}

// vmPid is the daemon's pid as its stats say.
func vmPid(t *testing.T, m *vmMachine) string {
	t.Helper()
	c := mustDialRS(t, m.daemon())
	st, err := c.stats()
	require.NoError(t, err)
	return st["pid"]
}

// TestVM runs the machine's scenarios in order on one boot sequence; each subtest leaves the daemon
// serving.
func TestVM(t *testing.T) {
	vmDir := os.Getenv(vmDirEnv)
	if vmDir == "" {
		t.Skipf("%s is not set: `make vm-check` builds the virtual machine and runs this", vmDirEnv)
	}
	m := startVM(t, vmDir, 1024)
	st := m.waitServing("")
	t.Logf("booted; the daemon serves (%s=%s)", statLoaded, st[statLoaded])

	t.Run("unit", func(t *testing.T) {
		m.ready(t)
		assert.Equal(t, "active", m.must("systemctl is-active "+vmUnit))
		assert.Equal(t, "notify", m.must("systemctl show -p Type --value "+vmUnit))
		assert.Equal(t, "leasecached", m.must("systemctl show -p User --value "+vmUnit))
		// A start that checks its settings: the live copy where the unit's hardening leaves /dev/shm.
		settings, err := mustDialRS(t, m.daemon()).statsGroup("settings")
		require.NoError(t, err)
		assert.Equal(t, "/var/lib/leasecached", settings["memory_file"])
		assert.Equal(t, "/dev/shm", settings["data_live"], "the live copy is not in /dev/shm under the unit")
		assert.Equal(t, "cgroup2fs", m.must("stat -f -c %T /sys/fs/cgroup"), "the guest's cgroups are not v2")
	})

	t.Run("systemctl restart keeps everything", func(t *testing.T) {
		m.ready(t)
		c, model := m.fill(t)
		maxCas := storeCAS(t, c, "cas-probe")
		checkReboot(t, c, model) // all there before the restart: what is missing after it, the restart lost
		require.False(t, t.Failed())
		pid := vmPid(t, m)
		m.must("systemctl restart " + vmUnit)
		st := m.waitServing(pid)
		c = mustDialRS(t, m.daemon())
		checkReboot(t, c, model)
		assert.Greater(t, storeCAS(t, c, "cas-probe-after"), maxCas)
		t.Logf("%s=%s %s=%s %s=%s", statLoaded, st[statLoaded], statDropped, st[statDropped], statSeconds, st[statSeconds])
	})

	t.Run("SIGKILL during writes, restarted by systemd", func(t *testing.T) {
		m.ready(t)
		vmKillRounds(t, m, 3, func(d *daemon) { m.must("systemctl kill -s KILL " + vmUnit) },
			"Failed with result 'signal'")
	})

	t.Run("OOM killer in the unit's cgroup during writes, restarted by systemd", func(t *testing.T) {
		m.ready(t)
		vmKillRounds(t, m, 2, func(d *daemon) { vmOOMKill(t, m, d) }, "Failed with result 'oom-kill'")
	})

	t.Run("clean reboot keeps everything", func(t *testing.T) {
		m.ready(t)
		c, model := m.fill(t)
		changeAfterSync(t, c, model)
		// A clean stop syncs: every change made after the last periodic sync must be back.
		for k, it := range model.after {
			if it.val == nil {
				model.gone = append(model.gone, k)
			} else {
				model.synced[k] = it
			}
		}
		model.maybe = nil
		st := m.reboot(false)
		c = mustDialRS(t, m.daemon())
		checkReboot(t, c, model)
		assert.Greater(t, storeCAS(t, c, "cas-probe-after"), model.maxCas)
		t.Logf("%s=%s %s=%s %s=%s", statLoaded, st[statLoaded], statDropped, st[statDropped], statSeconds, st[statSeconds])
	})

	t.Run("hard reset keeps what was synced", func(t *testing.T) {
		m.ready(t)
		c, model := m.fill(t)
		waitSyncs(t, c, 2) // the second one started after the writes were acknowledged
		changeAfterSync(t, c, model)
		st, err := c.stats()
		require.NoError(t, err)
		require.Equal(t, "0", st["evictions"], "everything must fit -m: an eviction is not what is tested")
		st = m.reboot(true)
		c = mustDialRS(t, m.daemon())
		survived := checkReboot(t, c, model)
		assert.Greater(t, storeCAS(t, c, "cas-probe-after"), model.maxCas)
		t.Logf("%s=%s %s=%s %s=%s; %d of %d changes made after the sync survived the reset", statLoaded,
			st[statLoaded], statDropped, st[statDropped], statSeconds, st[statSeconds], survived, len(model.after))
	})

	// Last, as it changes the unit: the unit as shipped runs as a dynamic user, whose RemoveIPC=yes removes
	// the user's files in /dev/shm, the live copy among them, when the unit stops (deploy/leasecached.service):
	// a restart reads the cache back from DIR, and one after a crash has at least what the last sync wrote.
	t.Run("DynamicUser reads the directory back", func(t *testing.T) {
		m.ready(t)
		// The fixed user's live copy is not the dynamic user's to read: a start would refuse it.
		m.must("systemctl stop " + vmUnit + " && rm -rf /dev/shm/leasecached-*")
		m.must(`printf '[Service]\nDynamicUser=yes\nUser=lcdyn\n' > /etc/systemd/system/` + vmUnit +
			`.service.d/zz-dynamic.conf && systemctl daemon-reload && systemctl start ` + vmUnit)
		m.ready(t)
		assert.Equal(t, "yes", m.must("systemctl show -p DynamicUser --value "+vmUnit))
		c, model := m.fill(t)
		m.must("systemctl stop " + vmUnit)
		out, _ := m.run("ls -d /dev/shm/leasecached-* 2>/dev/null | wc -l")
		assert.Equal(t, "0", strings.TrimSpace(out), "the live copy outlived the stop (RemoveIPC)")
		m.must("systemctl start " + vmUnit)
		st := m.waitServing("")
		c = mustDialRS(t, m.daemon())
		checkReboot(t, c, model)
		t.Logf("clean stop and start: %s=%s %s=%s", statLoaded, st[statLoaded], statSeconds, st[statSeconds])

		c, model = m.fill(t)
		waitSyncs(t, c, 2)
		changeAfterSync(t, c, model)
		pid := vmPid(t, m)
		m.must("systemctl kill -s KILL " + vmUnit)
		st = m.waitServing(pid)
		c = mustDialRS(t, m.daemon())
		survived := checkReboot(t, c, model)
		t.Logf("SIGKILL, restarted by systemd: %s=%s; %d of %d changes made after the sync survived", statLoaded,
			st[statLoaded], survived, len(model.after))
	})

	t.Logf("the unit's log:\n%s", m.must("journalctl -b 0 -u "+vmUnit+" --no-pager -o short-monotonic | tail -n 60"))
}

// vmKillRounds is killDuringWrites against the guest's daemon: kill ends it at each round's random
// moment, systemd restarts it (Restart=on-failure), and the journal must say why with result.
func vmKillRounds(t *testing.T, m *vmMachine, rounds int, kill func(d *daemon), result string) {
	t.Helper()
	count := func() int {
		out, _ := m.run("journalctl -u " + vmUnit + " --no-pager -o cat | grep -c \"" + result + "\"")
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	c := mustDialRS(t, m.daemon())
	_, err := c.call("flush_all\r\n") // the model starts from an empty cache
	require.NoError(t, err)
	before, restarts := count(), m.restarts()
	pid := ""
	killDuringWrites(t, rounds, func(string) *daemon {
		if pid == "" { // the first start: the daemon that serves now
			pid = vmPid(t, m)
			return m.daemon()
		}
		st := m.waitServing(pid)
		pid = st["pid"]
		return m.daemon()
	}, kill)
	assert.Equal(t, before+rounds, count(), "the journal's %q lines", result)
	assert.Equal(t, restarts+rounds, m.restarts(), "systemd's restarts of the unit")
}

// vmOOMKill caps the unit's cgroup (cgroup v2 memory.max, through systemd's MemoryMax) at vmOOMRoom above
// what it holds, then has connections send unfinished get lines, which the daemon gathers in memory of
// its own, until the kernel's OOM killer ends it (oomKill does the same in a cgroup v1 group).
func vmOOMKill(t *testing.T, m *vmMachine, d *daemon) {
	t.Helper()
	cur, err := strconv.ParseInt(m.must("cat /sys/fs/cgroup/system.slice/"+vmUnit+".service/memory.current"), 10, 64)
	require.NoError(t, err)
	restarts := m.restarts()
	m.must(fmt.Sprintf("systemctl set-property --runtime %s MemoryMax=%d", vmUnit, cur+vmOOMRoom))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(vmOOMTimeout)
	for m.restarts() == restarts {
		require.True(t, time.Now().Before(deadline), "the daemon outlived %v of pushing (%d lines): %s", vmOOMTimeout,
			len(conns), m.status())
		if len(conns) < vmOOMMaxPush {
			conns = oomPush(conns, d.addr, time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The restarted daemon runs without the cap, as a fresh start would.
	m.must("systemctl set-property --runtime " + vmUnit + " MemoryMax=infinity")
	t.Logf("the OOM killer ended the daemon after %d pushed lines (the cgroup held %d MB)", len(conns), cur>>20)
}
