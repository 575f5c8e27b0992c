package server

import "testing"

// TestStreamTransport runs the TLS tests on the stream transport (stream.go), which serves TLS where our
// gnet fork cannot lend a socket (gnet.Lender: everywhere but Linux), so that it stays tested here.
func TestStreamTransport(t *testing.T) {
	if streamTLS {
		t.Skip("the stream transport is the default here: every TLS test runs on it")
	}
	streamTLS = true
	t.Cleanup(func() { streamTLS = false })
	tests := []struct {
		name string
		f    func(*testing.T)
	}{
		{"ServesAndRefusesPlaintext", TestTLSServesAndRefusesPlaintext},
		{"RequestBehindLargeRecord", TestTLSRequestBehindLargeRecord},
		{"SlowReaderDoesNotStallOthers", TestTLSSlowReaderDoesNotStallOthers},
		{"LongAnswerInPieces", TestTLSLongAnswerInPieces},
		{"RefreshCerts", TestTLSRefreshCerts},
		{"ClientCertificates", TestTLSClientCertificates},
		{"IdleTimeout", TestTLSIdleTimeout},
		{"ConnectionLimit", TestTLSConnectionLimit},
		{"ConnectionLimitConcurrent", TestTLSConnectionLimitConcurrent},
		{"Stop", TestTLSStop},
		{"SessionCache", TestTLSSessionCache},
		{"StalledHandshakesStallNobody", TestTLSStalledHandshakesStallNobody},
		{"StopDuringHandshake", TestStopDuringHandshake},
		{"StopBeforeRunTLSOnly", TestStopBeforeRunTLSOnly},
		{"AuthBcrypt", TestTLSAuthBcrypt},
		{"CloseRightAfterHandshake", TestTLSCloseRightAfterHandshake},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.f)
	}
}
