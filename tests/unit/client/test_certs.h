// Test-only PEM files for the client's TLS tests (EC P-256, valid 2000-01-01 to 2125-01-01,
// made once with Python's cryptography package): a CA; a server certificate for the DNS
// name "gatescope-test-server" only, so connecting to 127.0.0.1 needs --tls-server-name;
// a client certificate for mutual TLS. Both signed by the CA. The keys protect nothing.
#pragma once

namespace gatescope::client::test_certs {

inline constexpr char kTestServerName[] = "gatescope-test-server";

inline constexpr char kCaPem[] = R"pem(-----BEGIN CERTIFICATE-----
MIIBbDCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFnYXRlc2Nv
cGUtdGVzdC1jYTAgFw0wMDAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowHDEa
MBgGA1UEAwwRZ2F0ZXNjb3BlLXRlc3QtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMB
BwNCAATmMrYEeX1hKJWC4QQH8kLM4gWPnzxV//O4h9S8IoHKK2QWZ2qUTAxLAb4i
iHjGsBeCDpx5n7EpK55rZAB97QR4o0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1Ud
DwEB/wQEAwIBhjAdBgNVHQ4EFgQUWGxoxlUAxQTDjPW2wKUh8/z5vl8wCgYIKoZI
zj0EAwIDSQAwRgIhAMWnNTeXoXpT/LKZ/C5x38QuRUKNMc4UvZv6Hg/Cy4kFAiEA
1mXN2ujkraOPCIYyd2lx1UJNsjil2GIxACixkVvUtjI=
-----END CERTIFICATE-----
)pem";

inline constexpr char kServerCertPem[] = R"pem(-----BEGIN CERTIFICATE-----
MIIBljCCATugAwIBAgIBAjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFnYXRlc2Nv
cGUtdGVzdC1jYTAgFw0wMDAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowIDEe
MBwGA1UEAwwVZ2F0ZXNjb3BlLXRlc3Qtc2VydmVyMFkwEwYHKoZIzj0CAQYIKoZI
zj0DAQcDQgAEAV7ATQdKizflOJuxxthAOtsyOhy/wCt1SehZaOnHJ1dv4WS1KMJG
77oM7tCqIz3vJsBAyudYWYxaeRSdXzZu86NoMGYwDAYDVR0TAQH/BAIwADATBgNV
HSUEDDAKBggrBgEFBQcDATAfBgNVHSMEGDAWgBRYbGjGVQDFBMOM9bbApSHz/Pm+
XzAgBgNVHREEGTAXghVnYXRlc2NvcGUtdGVzdC1zZXJ2ZXIwCgYIKoZIzj0EAwID
SQAwRgIhAORFG/LstRv7MPBHyukIPXhO6uhOOFS+gUJcWhmzh57bAiEA+SZIxlqA
LB+BQF1qAuKLlnJyxczUPVP7ERXViB/gOd0=
-----END CERTIFICATE-----
)pem";

inline constexpr char kServerKeyPem[] = R"pem(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZ39sC1OdCx5Dy9jc
5SEAWBYdLxG4G+36eukSRdtD42WhRANCAAQBXsBNB0qLN+U4m7HG2EA62zI6HL/A
K3VJ6Flo6ccnV2/hZLUowkbvugzu0KojPe8mwEDK51hZjFp5FJ1fNm7z
-----END PRIVATE KEY-----
)pem";

inline constexpr char kClientCertPem[] = R"pem(-----BEGIN CERTIFICATE-----
MIIBcjCCARmgAwIBAgIBAzAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFnYXRlc2Nv
cGUtdGVzdC1jYTAgFw0wMDAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowIDEe
MBwGA1UEAwwVZ2F0ZXNjb3BlLXRlc3QtY2xpZW50MFkwEwYHKoZIzj0CAQYIKoZI
zj0DAQcDQgAE9BmIb5O92mhsVlcxihukH2OTscgWHqjtjP4mNkhlT6kaYKOekccE
6kxd26ugItU936Sk+HXueEDHO19aaw0KjaNGMEQwDAYDVR0TAQH/BAIwADATBgNV
HSUEDDAKBggrBgEFBQcDAjAfBgNVHSMEGDAWgBRYbGjGVQDFBMOM9bbApSHz/Pm+
XzAKBggqhkjOPQQDAgNHADBEAiBAg+StxNp2kHoLILbL6LwFYfK6zx192R1i5p7g
Dj3jaQIgGanEkev8ELs9iow4HdR208GUXvaDgh+5/cOys5tkYNM=
-----END CERTIFICATE-----
)pem";

inline constexpr char kClientKeyPem[] = R"pem(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgyEniUtu3iF53yMy+
Aa54w75eUq0Bl0ihdRHrKcWKmauhRANCAAT0GYhvk73aaGxWVzGKG6QfY5OxyBYe
qO2M/iY2SGVPqRpgo56RxwTqTF3bq6Ai1T3fpKT4de54QMc7X1prDQqN
-----END PRIVATE KEY-----
)pem";

}  // namespace gatescope::client::test_certs
