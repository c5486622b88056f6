package labapi

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/cmlab/cmlab/confine"
)

// Who is asking (issue 27 finding 5). A Lab route that reads a file
// serves a caller only what that caller could read itself, so the daemon
// needs the caller's uid, which the kernel knows for a local connection:
//
//   - on the daemon's Unix socket, the listener admits only the daemon's
//     own uid and root (package discovery): the caller reads as the daemon;
//   - on loopback TCP, /proc/net/tcp (or tcp6) lists the caller's end of
//     the connection — local address = the request's remote address,
//     remote address = the daemon's — with the uid owning that socket;
//   - anything else (a remote client under --allow-remote, a connection
//     in another network namespace) has no known uid: it is "others" of
//     every file (confine.Nobody), and its imports are limited to the
//     narrower roots for unknown callers (Options.UnknownPeerRoots).
//
// Operator-token callers are the owner (the token opens a shell as the
// daemon's user) and are not checked.

// peerUser is the caller of r as confine checks it, and whether its uid
// is known.
func (s *Server) peerUser(r *http.Request) (confine.User, bool) {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	switch a := la.(type) {
	case *net.UnixAddr:
		return s.userOf(os.Geteuid()), true
	case *net.TCPAddr:
		remote, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !remote.Addr().Unmap().IsLoopback() {
			return confine.Nobody, false
		}
		uid, err := loopbackOwner(remote, a.AddrPort())
		if err != nil {
			s.log.Debug("caller's uid unknown", "remote", r.RemoteAddr, "err", err)
			return confine.Nobody, false
		}
		return s.userOf(uid), true
	}
	return confine.Nobody, false
}

// userOf is uid with its groups (from the user database; none when the
// uid has no entry: only the owner and others bits then apply).
func (s *Server) userOf(uid int) confine.User {
	s.peerMu.Lock()
	defer s.peerMu.Unlock()
	if u, ok := s.peerGroups[uid]; ok {
		return u
	}
	u := confine.User{UID: uid}
	if usr, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if ids, err := usr.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.Atoi(id); err == nil {
					u.GIDs = append(u.GIDs, g)
				}
			}
		}
	}
	if s.peerGroups == nil {
		s.peerGroups = map[int]confine.User{}
	}
	s.peerGroups[uid] = u
	return u
}

// errNoSocket: no row of /proc/net/tcp{,6} is the caller's end.
var errNoSocket = errors.New("no socket of /proc/net/tcp{,6} is the caller's end of the connection")

// loopbackOwner is the uid owning the socket whose local address is
// client and whose remote address is server: the caller's end of a
// loopback connection.
func loopbackOwner(client, server netip.AddrPort) (int, error) {
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := socketOwner(f, client, server)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNoSocket) {
			return -1, err
		}
	}
	return -1, errNoSocket
}

// socketOwner scans one /proc/net/tcp* table: "sl local rem st tx:rx
// tr:when retrnsmt uid …", addresses as hex of the kernel's words in host
// byte order, ports in hex.
func socketOwner(file string, local, remote netip.AddrPort) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 8 {
			continue
		}
		l, err1 := parseProcAddr(fields[1])
		r, err2 := parseProcAddr(fields[2])
		if err1 != nil || err2 != nil || l != local || r != remote {
			continue
		}
		uid, err := strconv.Atoi(string(fields[7]))
		if err != nil {
			return -1, fmt.Errorf("%s: uid %q: %w", file, fields[7], err)
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return -1, err
	}
	return -1, errNoSocket
}

// parseProcAddr parses "0100007F:1F90" (IPv4) or the 32-hex-digit IPv6
// form; a v4-mapped IPv6 address is unmapped.
func parseProcAddr(b []byte) (netip.AddrPort, error) {
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return netip.AddrPort{}, errors.New("no port")
	}
	raw, err := hex.DecodeString(string(b[:i]))
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, errors.New("bad address")
	}
	port, err := strconv.ParseUint(string(b[i+1:]), 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Each 32-bit word was printed as a number in host byte order.
	var ip [16]byte
	for w := 0; w < len(raw); w += 4 {
		binary.NativeEndian.PutUint32(ip[w:], binary.BigEndian.Uint32(raw[w:]))
	}
	var a netip.Addr
	if len(raw) == 4 {
		a = netip.AddrFrom4([4]byte(ip[:4]))
	} else {
		a = netip.AddrFrom16(ip).Unmap()
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// fileReader is who r's file reads are checked for; checked is false for
// the operator token (the owner), which reads what the daemon reads.
func (s *Server) fileReader(r *http.Request) (u confine.User, known, checked bool) {
	if s.tokenKind(r) == tokenOperator {
		return confine.User{}, true, false
	}
	u, known = s.peerUser(r)
	return u, known, true
}

// openRunFile opens name beneath a run's real directory for r's caller.
// A last-component symlink is followed into the run's folder or the
// caller's allowed roots (confine.OpenLinked).
func (s *Server) openRunFile(r *http.Request, root, name string) (*os.File, error) {
	if u, _, checked := s.fileReader(r); checked {
		return confine.OpenLinkedFor(root, name, s.importRoots(r), u)
	}
	return confine.OpenLinked(root, name, s.importRoots(r))
}

// readRunFile reads name beneath a run's real directory for r's caller.
func (s *Server) readRunFile(r *http.Request, root, name string, max int64) ([]byte, error) {
	if u, _, checked := s.fileReader(r); checked {
		return confine.ReadFileLinked(root, name, s.importRoots(r), max, &u)
	}
	return confine.ReadFileLinked(root, name, s.importRoots(r), max, nil)
}

// importRoots are the roots r's caller may import from: the allowed
// roots, or for a caller of unknown uid the narrower UnknownPeerRoots.
func (s *Server) importRoots(r *http.Request) []string {
	if _, known, checked := s.fileReader(r); checked && !known {
		return s.opts.UnknownPeerRoots
	}
	return s.opts.AllowedRoots
}

// checkImportReadable refuses an import whose files r's caller could not
// read itself (the files the Lab will serve or read from the run).
func (s *Server) checkImportReadable(r *http.Request, realDir string, roots []string, files ...string) error {
	u, _, checked := s.fileReader(r)
	if !checked {
		return nil
	}
	if err := confine.SearchableBy(realDir, u); err != nil {
		return accessError(err)
	}
	for _, p := range files {
		if p == "" {
			continue
		}
		f, err := confine.OpenLinkedFor(realDir, filepath.Base(p), roots, u)
		if errors.Is(err, confine.ErrAccess) {
			return accessError(err)
		}
		if err == nil {
			f.Close()
		}
	}
	return nil
}

// accessError is the 403 of a file its caller could not read itself.
func accessError(err error) *APIError {
	return NewError(CodeForbidden, "you cannot read this file yourself: "+err.Error(),
		"The Lab serves and imports only files its caller could read (owner and mode bits against the caller's uid). Make the files readable to you, or run the import as the files' owner (cmlab runs import, or the operator token).")
}
