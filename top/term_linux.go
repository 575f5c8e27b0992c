package top

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal.
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}

// keyMode lets the view read single keys: no line buffering, no echo, and Ctrl-C and Ctrl-Z arrive as bytes
// (the view quits on Ctrl-C and has nothing to suspend into a shell with the screen switched). Output
// processing is left on. restore puts the terminal back as it was.
func keyMode(fd uintptr) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.IXON | unix.ICRNL
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(int(fd), unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(int(fd), unix.TCSETS, old) }, nil
}

// termSize is the terminal's columns and rows; 0, 0 when unknown.
func termSize(fd uintptr) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
