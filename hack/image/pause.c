/*
 * berthmaster's pod sandbox process for the local control plane's real nodes.
 *
 * containerd starts one sandbox container per pod to hold the pod's namespaces; all it needs
 * is a process that stays up, reaps the orphans the namespace hands it, and exits cleanly
 * when containerd stops the sandbox. No registry is reachable on our build machines, so this
 * is compiled statically here and imported as a one-file image (berthmaster dev image).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signum) {
    (void)signum;
    _exit(0);
}

static void on_child(int signum) {
    (void)signum;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static void handle(int signum, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART | (signum == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&action.sa_mask);
    if (sigaction(signum, &action, NULL) != 0) {
        exit(1);
    }
}

int main(void) {
    handle(SIGINT, on_stop);
    handle(SIGTERM, on_stop);
    handle(SIGCHLD, on_child);
    for (;;) {
        pause();
    }
}
